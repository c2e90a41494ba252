// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore when PostgreSQL fails: a terminated backend, a refused
 * connection, a statement past `timeoutMs`, and claims that committed
 * although they timed out or failed, which the store undoes (rule 10).
 *
 * Every test works in a schema of its own, dropped afterwards.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { type PostgresSql, PostgresStore } from "../../src/stores/postgres.ts";
import { StoreError } from "../../src/store.ts";
import { startPostgresServer, uniquePrefix } from "../_support/services.ts";
import { post } from "../_support/http.ts";
import { sleep, waitFor } from "../_support/time.ts";
import { untilRunsAgain, warmCountingHandler } from "../_support/stores.ts";
import {
  connect,
  ok,
  opts,
  pgTest,
  quiet,
  quote,
  withSchema,
} from "./_postgres_fixtures.ts";

// --- faults ------------------------------------------------------------------

pgTest(
  "PostgresStore recovers after pg_terminate_backend of its connection",
  () =>
    withSchema(async (schema, admin) => {
      const application = uniquePrefix("terminate");
      const sql = connect({
        max: 1,
        connection: { application_name: application },
      });
      try {
        const store = new PostgresStore({ sql, table: `${schema}.keys` });
        await store.migrate();
        const claim = await store.claim("t", opts("t"));
        assert.equal(claim.state, "acquired");
        if (claim.state !== "acquired") return;
        const [killed] = await admin.unsafe(
          `SELECT count(pg_terminate_backend(pid, 5000))::int AS n
           FROM pg_stat_activity WHERE application_name = $1`,
          [application],
        );
        assert.equal(killed?.n, 1);
        // The operation in between may meet the closed connection.
        try {
          await store.extend("t", claim.token, 30_000);
        } catch (error) {
          assert.ok(error instanceof StoreError, String(error));
          assert.equal(error.operation, "extend");
          assert.ok(error.cause !== undefined);
        }
        // The next one reconnects.
        assert.equal(await store.complete("t", claim.token, ok), "applied");
        assert.equal((await store.claim("t", opts("t"))).state, "completed");
      } finally {
        await sql.end();
      }
    }),
);

pgTest(
  "PostgresStore throws StoreError at once when the connection is refused",
  async () => {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (listener.addr as Deno.NetAddr).port;
    listener.close();
    const sql = postgres(`postgres://postgres@127.0.0.1:${port}/test`, {
      ...quiet,
      max: 1,
    });
    try {
      const store = new PostgresStore({ sql });
      await assert.rejects(
        () => store.claim("refused", opts("r")),
        (error: unknown) => {
          assert.ok(error instanceof StoreError);
          assert.equal(error.operation, "claim");
          assert.ok(error.cause instanceof Error);
          // At once: the refusal itself, not the 2 s timeout.
          assert.doesNotMatch(error.message, /did not answer within/);
          return true;
        },
      );
      await assert.rejects(
        () => store.complete("refused", "token", ok),
        (error: unknown) =>
          error instanceof StoreError && error.operation === "complete" &&
          /outcome unknown/.test(error.message),
      );
    } finally {
      await sql.end();
    }
  },
);

pgTest(
  "PostgresStore gives up after timeoutMs and throws StoreError; a server-side lock_timeout stops the statement too",
  () =>
    withSchema(async (schema, admin) => {
      // The store sends no cancel request (it could hit another statement
      // pipelined on the connection): the server-side bound the README
      // recommends is what stops the statement on the server.
      const sql = connect({ max: 2, connection: { lock_timeout: 1000 } });
      try {
        const table = `${schema}.keys`;
        const store = new PostgresStore({ sql, table, timeoutMs: 300 });
        await store.migrate();
        const claim = await store.claim("locked", opts("l", { leaseMs: 1 }));
        assert.equal(claim.state, "acquired");
        await sleep(20); // the lease ran out: the next claim must take the row over
        // Another session holds the row lock for longer than the timeout.
        await admin.begin(async (tx) => {
          await tx.unsafe(
            `SELECT 1 FROM ${store.table} WHERE slot = 'locked' FOR UPDATE`,
          );
          await assert.rejects(
            () => store.claim("locked", opts("l")),
            (error: unknown) =>
              error instanceof StoreError && error.operation === "claim" &&
              error.message === "PostgreSQL claim did not answer within 300 ms",
          );
          // The server stops waiting too, by its own lock_timeout.
          let waiting = 1;
          for (let i = 0; i < 600 && waiting > 0; i++) {
            await sleep(50);
            const [row] = await tx.unsafe(
              `SELECT count(*)::int AS n FROM pg_stat_activity
               WHERE wait_event_type = 'Lock' AND query LIKE $1`,
              [`%INSERT INTO ${store.table}%`],
            );
            waiting = row?.n as number;
          }
          assert.equal(waiting, 0, "the claim no longer waits on the server");
        });
        // And the pool still works.
        assert.equal(
          (await store.claim("locked", opts("l"))).state,
          "acquired",
          "the free row is taken over once the lock is gone",
        );
      } finally {
        await sql.end();
      }
    }),
);

// --- a claim cancelled too late commits: it is undone (rule 10) --------------
// On a PostgreSQL of the test's own: the backend of the store's only
// connection is stopped (SIGSTOP) while a claim is sent, so the claim waits
// in its socket past `timeoutMs` and the middleware answers 503. The store
// sends no cancel (see `timeoutMs`), and a server-side timeout would not
// help either: the backend runs the claim when it resumes and commits. The
// slot must not stay in flight for the lease.

pgTest(
  "PostgresStore undoes a claim that timed out and committed anyway",
  async () => {
    const server = await startPostgresServer();
    const sql = postgres(server.url, { ...quiet, max: 1 });
    let stopped: number | undefined;
    try {
      const store = new PostgresStore({ sql, timeoutMs: 300 });
      await store.migrate();
      const { handler, runs } = await warmCountingHandler(store);
      const [row] = await sql`select pg_backend_pid() as pid`;
      stopped = Number(row!.pid);
      Deno.kill(stopped, "SIGSTOP");
      const failed = await handler(post("late-1"));
      assert.equal(failed.status, 503);
      await failed.body?.cancel();
      Deno.kill(stopped, "SIGCONT");
      stopped = undefined;
      await untilRunsAgain(handler, "late-1");
      assert.equal(runs(), 2);
    } finally {
      if (stopped !== undefined) Deno.kill(stopped, "SIGCONT");
      await sql.end({ timeout: 1 });
      await server.stop();
    }
  },
);

Deno.test("PostgresStore undoes a claim whose connection broke under it, not one the server refused or that was never sent", async () => {
  const releases: unknown[][] = [];
  let failure: unknown;
  const sql = {
    unsafe(text: string, parameters?: unknown[]) {
      const reply = text.startsWith("DELETE")
        ? (releases.push(parameters ?? []),
          Promise.resolve(Object.assign([], { count: 1 })))
        : Promise.reject(failure);
      return Object.assign(reply, { cancel() {} });
    },
  } as unknown as PostgresSql;
  const store = new PostgresStore({ sql, timeoutMs: 1000 });
  const fail = (code: string) =>
    Object.assign(new Error(code), { code }) as unknown;
  // As postgres.js reports an error response: with its severity.
  const refuse = (code: string, severity = "ERROR") =>
    Object.assign(new Error(code), { name: "PostgresError", code, severity });
  // Sent, and the connection broke: a socket error (EPIPE has the shape of
  // a SQLSTATE), or the backend terminated (FATAL) after it may have
  // committed.
  const broken = [
    fail("CONNECTION_CLOSED"),
    fail("EPIPE"),
    fail("ECONNRESET"),
    refuse("57P01", "FATAL"),
  ];
  for (const [i, error] of broken.entries()) {
    failure = error;
    await assert.rejects(() => store.claim(`s1-${i}`, opts("fp")), StoreError);
    await waitFor("the undo", () => releases.length === i + 1);
    assert.equal(releases[i]![0], `s1-${i}`);
  }
  for (
    const error of [
      refuse("57014"),
      refuse("40001"),
      fail("ECONNREFUSED"),
      fail("CONNECTION_ENDED"),
    ]
  ) {
    failure = error;
    await assert.rejects(() => store.claim("s2", opts("fp")), StoreError);
  }
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(releases.length, broken.length);
});

pgTest(
  "PostgresStore undoes a claim that committed although its statement failed with EPIPE",
  async () => {
    // postgres.js rejects every statement in flight on a connection with the
    // socket's error, also one the server had already committed: here the
    // claim commits, then its answer is an EPIPE.
    const sql = connect({ max: 2 });
    const table = uniquePrefix("pg_epipe");
    try {
      let lose = true;
      const lossy: PostgresSql = {
        options: sql.options,
        unsafe(text, parameters, options) {
          const query = sql.unsafe(text, parameters, options);
          if (!(lose && text.startsWith("WITH cur"))) return query;
          lose = false;
          return query.then(() => {
            throw Object.assign(new Error("write EPIPE"), {
              code: "EPIPE",
              errno: -32,
              syscall: "write",
            });
          }) as unknown as ReturnType<PostgresSql["unsafe"]>;
        },
      };
      const store = new PostgresStore({
        sql: lossy,
        table,
      });
      await store.migrate();
      const options = { fingerprint: "fp", leaseMs: 600_000, ttlMs: 600_000 };
      await assert.rejects(() => store.claim("slot", options), StoreError);
      // Not in flight for the lease: the store undoes its own claim.
      await waitFor(
        "the committed claim to be undone",
        async () => (await store.claim("slot", options)).state === "acquired",
      );
    } finally {
      await sql.unsafe(`DROP TABLE IF EXISTS ${quote(table)}`).catch(() => {});
      await sql.end({ timeout: 1 });
    }
  },
);
