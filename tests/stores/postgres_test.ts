// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore against the PostgreSQL of this machine (`DATABASE_URL`):
 * every test works in a schema of its own, dropped afterwards.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  postgresMigration,
  type PostgresSql,
  PostgresStore,
} from "../../src/stores/postgres.ts";
import { StoreError } from "../../src/store.ts";
import type { ClaimOptions, StoredResponse } from "../../src/store.ts";
import { storeConformance } from "../../src/testing.ts";
import type { PoisonKind } from "../../src/testing.ts";
import {
  DATABASE_URL,
  integrationTest,
  POSTGRES_IGNORE,
  startPostgresServer,
  uniquePrefix,
} from "../_support/services.ts";
import { post } from "../_support/http.ts";
import { sleep, waitFor } from "../_support/time.ts";
import { untilRunsAgain, warmCountingHandler } from "../_support/stores.ts";

type Sql = ReturnType<typeof postgres>;

const ignore = POSTGRES_IGNORE;
const quiet = { onnotice: () => {} };

function connect(options: Record<string, unknown> = {}): Sql {
  return postgres(DATABASE_URL, { ...quiet, ...options });
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** A schema for one test, dropped (with everything in it) afterwards. */
async function withSchema(
  fn: (schema: string, admin: Sql) => Promise<void>,
  name: string = uniquePrefix("pgstore"),
): Promise<void> {
  const admin = connect({ max: 1 });
  try {
    await admin.unsafe(`CREATE SCHEMA ${quote(name)}`);
    try {
      await fn(name, admin);
    } finally {
      await admin.unsafe(`DROP SCHEMA ${quote(name)} CASCADE`);
    }
  } finally {
    await admin.end();
  }
}

/**
 * A migrated PostgresStore on `<schema>.keys` over a pool of its own,
 * ended afterwards.
 */
async function withStore(
  schema: string,
  pool: Record<string, unknown>,
  fn: (store: PostgresStore, sql: Sql) => Promise<void>,
): Promise<void> {
  const sql = connect(pool);
  try {
    const store = new PostgresStore({ sql, table: `${schema}.keys` });
    await store.migrate();
    await fn(store, sql);
  } finally {
    await sql.end();
  }
}

const opts = (
  fingerprint: string,
  more: Partial<ClaimOptions> = {},
): ClaimOptions => ({ fingerprint, leaseMs: 30_000, ttlMs: 60_000, ...more });

const ok: StoredResponse = {
  status: 201,
  headers: [["content-type", "text/plain"], ["set-cookie", "a=1"], [
    "set-cookie",
    "b=2",
  ]],
  body: new TextEncoder().encode("done"),
};

function pgTest(name: string, fn: () => Promise<void>): void {
  integrationTest(name, ignore, fn);
}

// --- the shared suite -------------------------------------------------------

let conformanceSchema = "";
storeConformance({
  name: "PostgresStore",
  ignore,
  leaseMs: 300,
  async setup() {
    const admin = connect({ max: 1 });
    const sql = connect({ max: 10 });
    conformanceSchema = uniquePrefix("pgconf");
    await admin.unsafe(`CREATE SCHEMA ${quote(conformanceSchema)}`);
    const table = `${conformanceSchema}.idempotency_keys`;
    const store = new PostgresStore({ sql, table });
    await store.migrate();
    return {
      store,
      elapse: sleep,
      async poison(slot: string, kind: PoisonKind) {
        await plant(admin, store.table, slot, kind);
      },
      async teardown() {
        await admin.unsafe(`DROP SCHEMA ${quote(conformanceSchema)} CASCADE`);
        await sql.end();
        await admin.end();
      },
    };
  },
});

/** The kinds of row that no PostgresStore writes. */
type Plant = PoisonKind | "no_deadline" | "bad_headers" | "null_status";

/** Writes a row at `slot` that no PostgresStore wrote. */
async function plant(
  sql: Sql,
  table: string,
  slot: string,
  kind: Plant,
): Promise<void> {
  const later = "statement_timestamp() + interval '1 hour'";
  const before = "statement_timestamp() - interval '1 second'";
  const rows: Record<Plant, [columns: string, values: string]> = {
    // An unknown state, no owner, headers that are not pairs.
    garbage: [
      "version, state, fingerprint, token, lease_until, expires_at, headers",
      `1, 'x?!', NULL, NULL, ${before}, ${later}, '{"not":"pairs"}'`,
    ],
    // A completed row whose body and omitted disagree (both missing).
    truncated: [
      "version, state, fingerprint, token, expires_at, status, headers, body, omitted",
      `1, 'completed', 'fp', 't', ${later}, 200, '[["a","b"]]', NULL, NULL`,
    ],
    // A later format, its lease already over: still not ours to take.
    "future_version": [
      "version, state, fingerprint, token, lease_until, expires_at",
      `99, 'in_flight', 'fp', 't', ${before}, ${later}`,
    ],
    // A claim of ours with an expired lease but no deadline at all.
    "no_deadline": [
      "version, state, fingerprint, token, lease_until, expires_at",
      `1, 'in_flight', 'fp', 't', ${before}, NULL`,
    ],
    // Headers that are not string pairs.
    "bad_headers": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, 'completed', 'fp', 't', ${later}, 200, '[["a",1]]', '\\x00'`,
    ],
    // No status.
    "null_status": [
      "version, state, fingerprint, token, expires_at, status, headers, body",
      `1, 'completed', 'fp', 't', ${later}, NULL, '[]', '\\x00'`,
    ],
  };
  const [columns, values] = rows[kind];
  await sql.unsafe(
    `INSERT INTO ${table} (slot, ${columns}) VALUES ($1, ${values})`,
    [slot],
  );
}

// --- helpers for the integration tests --------------------------------------

/**
 * A TCP relay between the driver and the server that counts what the server
 * is sent: `Q` (a simple query), `E` (an Execute of the extended protocol,
 * one statement) and `S` (a Sync, which closes a round trip).
 */
class WireCounter {
  readonly counts = { query: 0, execute: 0, sync: 0, parse: 0 };
  readonly #listener: Deno.Listener;
  readonly #conns = new Set<Deno.Conn>();
  readonly #target: { hostname: string; port: number };

  constructor(target: { hostname: string; port: number }) {
    this.#target = target;
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#accept();
  }

  /** The DATABASE_URL, pointed at the relay. */
  get url(): string {
    const url = new URL(DATABASE_URL);
    url.hostname = "127.0.0.1";
    url.port = String((this.#listener.addr as Deno.NetAddr).port);
    return url.href;
  }

  /** Statements the server was asked to run: Execute plus simple queries. */
  get statements(): number {
    return this.counts.execute + this.counts.query;
  }

  async #accept(): Promise<void> {
    try {
      for await (const client of this.#listener) this.#relay(client);
    } catch { /* closed */ }
  }

  async #relay(client: Deno.Conn): Promise<void> {
    const server = await Deno.connect(this.#target);
    this.#conns.add(client).add(server);
    const counts = this.counts;
    let pending = new Uint8Array(0);
    let started = false;
    const count = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const joined = new Uint8Array(pending.byteLength + chunk.byteLength);
        joined.set(pending);
        joined.set(chunk, pending.byteLength);
        let at = 0;
        const view = new DataView(joined.buffer);
        while (true) {
          if (!started) {
            if (joined.byteLength - at < 4) break;
            const length = view.getInt32(at);
            if (joined.byteLength - at < length) break;
            at += length;
            started = true;
            continue;
          }
          if (joined.byteLength - at < 5) break;
          const length = view.getInt32(at + 1);
          if (joined.byteLength - at < 1 + length) break;
          const type = String.fromCharCode(joined[at]!);
          if (type === "Q") counts.query++;
          if (type === "E") counts.execute++;
          if (type === "S") counts.sync++;
          if (type === "P") counts.parse++;
          at += 1 + length;
        }
        pending = joined.slice(at);
        controller.enqueue(chunk);
      },
    });
    await Promise.allSettled([
      client.readable.pipeThrough(count).pipeTo(server.writable),
      server.readable.pipeTo(client.writable),
    ]);
    this.#conns.delete(client);
    this.#conns.delete(server);
  }

  /** A snapshot of the counts. */
  snapshot(): WireCounter["counts"] {
    return { ...this.counts };
  }

  close(): void {
    this.#listener.close();
    for (const conn of this.#conns) {
      try {
        conn.close();
      } catch { /* already closed */ }
    }
  }
}

function databaseTarget(): { hostname: string; port: number } {
  const url = new URL(DATABASE_URL);
  return {
    hostname: url.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1",
    port: url.port ? Number(url.port) : 5432,
  };
}

// --- one statement per operation -------------------------------------------

pgTest(
  "PostgresStore runs one statement in one round trip per operation, counted on the wire",
  () =>
    withSchema(async (schema) => {
      const wire = new WireCounter(databaseTarget());
      const seen: string[] = [];
      const sql = postgres(wire.url, {
        ...quiet,
        max: 1,
        debug: (_connection: number, query: string) => seen.push(query),
      });
      try {
        const store = new PostgresStore({ sql, table: `${schema}.keys` });
        await store.migrate();
        // Warm up: the first use of each statement also prepares it.
        const warm = await store.claim("warm", opts("w"));
        assert.equal(warm.state, "acquired");
        if (warm.state !== "acquired") return;
        await store.extend("warm", warm.token, 30_000);
        await store.complete("warm", warm.token, ok);
        await store.claim("warm", opts("w"));
        const w2 = await store.claim("warm-2", opts("w"));
        if (w2.state === "acquired") await store.release("warm-2", w2.token);

        const measure = async (name: string, op: () => Promise<unknown>) => {
          const before = wire.snapshot();
          const queries = seen.length;
          await op();
          const after = wire.snapshot();
          assert.equal(seen.length - queries, 1, `${name}: driver queries`);
          assert.equal(
            after.execute + after.query - before.execute - before.query,
            1,
            `${name}: statements the server received`,
          );
          assert.equal(after.sync - before.sync, 1, `${name}: round trips`);
          assert.equal(after.parse - before.parse, 0, `${name}: re-parses`);
        };
        let token = "";
        await measure("claim (fresh)", async () => {
          const claim = await store.claim("s", opts("f"));
          assert.equal(claim.state, "acquired");
          if (claim.state === "acquired") token = claim.token;
        });
        await measure("claim (in flight)", async () => {
          assert.equal((await store.claim("s", opts("f"))).state, "in_flight");
        });
        await measure("extend", async () => {
          assert.equal(await store.extend("s", token, 30_000), "applied");
        });
        await measure("complete", async () => {
          assert.equal(await store.complete("s", token, ok), "applied");
        });
        await measure("claim (replay)", async () => {
          assert.equal((await store.claim("s", opts("f"))).state, "completed");
        });
        await measure("release (lost)", async () => {
          assert.equal(await store.release("s", token), "lost");
        });
        const other = await store.claim("r", opts("f"));
        await measure("release", async () => {
          if (other.state !== "acquired") throw new Error("not acquired");
          assert.equal(await store.release("r", other.token), "applied");
        });
      } finally {
        await sql.end();
        wire.close();
      }
    }),
);

// --- concurrency -------------------------------------------------------------

pgTest(
  "PostgresStore gives one of 50 concurrent claims on one slot, over 25 connections, the slot",
  () =>
    withSchema(async (schema) => {
      await withStore(schema, { max: 25 }, async (store) => {
        for (let round = 0; round < 3; round++) {
          const slot = `race-${round}`;
          const results = await Promise.all(
            Array.from(
              { length: 50 },
              (_, i) => store.claim(slot, opts(`${i}`)),
            ),
          );
          const winners = results.flatMap((r, i) =>
            r.state === "acquired" ? [i] : []
          );
          assert.equal(winners.length, 1);
          for (const r of results) {
            if (r.state === "in_flight") {
              assert.equal(r.fingerprint, `${winners[0]}`);
            } else assert.equal(r.state, "acquired");
          }
        }
      });
    }),
);

pgTest(
  "PostgresStore works on a pool of one: no connection is held while the handler runs",
  () =>
    withSchema(async (schema, admin) => {
      const application = uniquePrefix("pool_of_one");
      const sql = connect({
        max: 1,
        connection: { application_name: application },
      });
      try {
        const store = new PostgresStore({
          sql,
          table: `${schema}.keys`,
          timeoutMs: 1000,
        });
        await store.migrate();
        const claim = await store.claim("held", opts("first"));
        assert.equal(claim.state, "acquired");
        if (claim.state !== "acquired") return;

        // The handler of "held" runs: a promise that settles only at the end.
        let finish!: () => void;
        const handler = new Promise<void>((resolve) => finish = resolve);
        let handlerDone = false;
        const running = handler.then(() => handlerDone = true);

        // Meanwhile the one connection is idle, not idle in a transaction.
        const [activity] = await admin.unsafe(
          "SELECT state FROM pg_stat_activity WHERE application_name = $1",
          [application],
        );
        assert.equal(activity?.state, "idle");

        // And other requests go through the same single connection.
        const started = performance.now();
        const others = await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const seen = await store.claim("held", opts("retry"));
            assert.equal(seen.state, "in_flight");
            const mine = await store.claim(`other-${i}`, opts(`o${i}`));
            assert.equal(mine.state, "acquired");
            if (mine.state !== "acquired") return;
            assert.equal(
              await store.complete(`other-${i}`, mine.token, ok),
              "applied",
            );
            assert.equal(
              (await store.claim(`other-${i}`, opts(`o${i}`))).state,
              "completed",
            );
          }),
        );
        assert.equal(others.length, 20);
        assert.equal(
          handlerDone,
          false,
          "all of that ran while the handler ran",
        );
        assert.ok(
          performance.now() - started < 15_000,
          "nobody waited out a lease (30 s)",
        );
        assert.equal(
          await store.extend("held", claim.token, 30_000),
          "applied",
        );

        finish();
        await running;
        assert.equal(await store.complete("held", claim.token, ok), "applied");
        assert.equal((await store.claim("held", opts("x"))).state, "completed");
      } finally {
        await sql.end();
      }
    }),
);

pgTest(
  "PostgresStore.migrate() run by five instances at once creates the table once",
  () =>
    withSchema(async (schema, admin) => {
      const table = `${schema}.keys`;
      const sqls = Array.from({ length: 5 }, () => connect({ max: 1 }));
      try {
        await Promise.all(
          sqls.map((sql) => new PostgresStore({ sql, table }).migrate()),
        );
        await Promise.all(
          sqls.map((sql) => new PostgresStore({ sql, table }).migrate()),
        );
        const [row] = await admin.unsafe(
          `SELECT count(*)::int AS n FROM pg_indexes WHERE schemaname = $1`,
          [schema],
        );
        assert.equal(row?.n, 2, "the primary key and the expires_at index");
        const store = new PostgresStore({ sql: sqls[0]!, table });
        assert.equal((await store.claim("m", opts("m"))).state, "acquired");
      } finally {
        await Promise.all(sqls.map((sql) => sql.end()));
      }
    }),
);

pgTest(
  "PostgresStore.migrate() creates a missing schema, from five instances at once",
  async () => {
    // A fresh schema no one created, with a quote in its name.
    const schema = `${uniquePrefix("pgschema")}'"x`;
    const table = `${schema}.idempotency_keys`;
    const admin = connect({ max: 1 });
    const sqls = Array.from({ length: 5 }, () => connect({ max: 1 }));
    try {
      await Promise.all(
        sqls.map((sql) => new PostgresStore({ sql, table }).migrate()),
      );
      const [row] = await admin.unsafe(
        `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1`,
        [schema],
      );
      assert.equal(row?.n, 1);
      const store = new PostgresStore({ sql: sqls[0]!, table });
      const claim = await store.claim("s", opts("s"));
      assert.equal(claim.state, "acquired");
      if (claim.state === "acquired") {
        assert.equal(await store.complete("s", claim.token, ok), "applied");
      }
      assert.equal((await store.claim("s", opts("s"))).state, "completed");
    } finally {
      await Promise.all(sqls.map((sql) => sql.end()));
      await admin.unsafe(`DROP SCHEMA IF EXISTS ${quote(schema)} CASCADE`);
      await admin.end();
    }
  },
);

pgTest(
  "PostgresStore.migrate() into an existing schema needs no right to create schemas",
  () =>
    withSchema(async (schema, admin) => {
      const role = uniquePrefix("pgrole");
      await admin.unsafe(`CREATE ROLE ${quote(role)} LOGIN`);
      try {
        await admin.unsafe(
          `GRANT USAGE, CREATE ON SCHEMA ${quote(schema)} TO ${quote(role)}`,
        );
        const url = new URL(DATABASE_URL);
        url.username = role;
        url.password = "";
        const sql = postgres(url.href, { ...quiet, max: 1 });
        try {
          const store = new PostgresStore({ sql, table: `${schema}.keys` });
          await store.migrate();
          assert.equal((await store.claim("r", opts("r"))).state, "acquired");
        } finally {
          await sql.end();
        }
      } finally {
        await admin.unsafe(`DROP SCHEMA ${quote(schema)} CASCADE`);
        await admin.unsafe(`CREATE SCHEMA ${quote(schema)}`);
        await admin.unsafe(`DROP ROLE ${quote(role)}`);
      }
    }),
);

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
          assert.doesNotMatch(error.message, /No answer within/);
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
              /300 ms/.test(error.message),
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

// --- sweep, names, poisoned rows --------------------------------------------

pgTest(
  "PostgresStore.sweep() deletes only expired rows, in bounded batches",
  () =>
    withSchema(async (schema, admin) => {
      const seen: string[] = [];
      const sql = connect({
        max: 1,
        debug: (_c: number, query: string) => seen.push(query),
      });
      try {
        const store = new PostgresStore({ sql, table: `${schema}.keys` });
        await store.migrate();
        for (let i = 0; i < 7; i++) {
          const c = await store.claim(`short-${i}`, opts("s", { ttlMs: 50 }));
          if (c.state === "acquired" && i % 2 === 0) {
            await store.complete(`short-${i}`, c.token, ok);
          }
        }
        for (let i = 0; i < 3; i++) {
          await store.claim(`long-${i}`, opts("l", { ttlMs: 60_000 }));
        }
        await plant(admin, store.table, "poison-undated", "no_deadline");
        await sleep(150);
        const before = seen.length;
        assert.equal(await store.sweep({ batchSize: 3 }), 7);
        assert.equal(seen.length - before, 3, "batches of 3, 3 and 1");
        assert.equal(await store.sweep(), 0);
        const rows = await admin.unsafe(
          `SELECT slot FROM ${store.table} ORDER BY slot`,
        );
        assert.deepEqual(rows.map((r) => r.slot), [
          "long-0",
          "long-1",
          "long-2",
          "poison-undated",
        ]);
        await assert.rejects(() => store.sweep({ batchSize: 0 }), RangeError);
      } finally {
        await sql.end();
      }
    }),
);

pgTest(
  "PostgresStore quotes a schema-qualified table name with odd characters",
  async () => {
    const schema = `${uniquePrefix("odd")} "odd"; schema-é`;
    await withSchema(async () => {
      const sql = connect({ max: 1 });
      try {
        const table = `${schema}.Keys "quoted"; DROP TABLE x; --é`;
        const store = new PostgresStore({ sql, table });
        await store.migrate();
        await store.migrate();
        const claim = await store.claim("odd", opts("o", { ttlMs: 50 }));
        assert.equal(claim.state, "acquired");
        if (claim.state !== "acquired") return;
        assert.equal(await store.complete("odd", claim.token, ok), "applied");
        const replay = await store.claim("odd", opts("o"));
        assert.equal(replay.state, "completed");
        await sleep(100);
        assert.equal(await store.sweep(), 1);
        const [found] = await sql.unsafe(
          `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1 AND tablename = $2`,
          [schema, `Keys "quoted"; DROP TABLE x; --é`],
        );
        assert.equal(found?.n, 1);
      } finally {
        await sql.end();
      }
    }, schema);
  },
);

pgTest(
  "PostgresStore reads unreadable rows as in flight and never takes them over before their own expiry",
  () =>
    withSchema(async (schema, admin) => {
      await withStore(schema, { max: 2 }, async (store) => {
        const kinds = [
          "garbage",
          "truncated",
          "future_version",
          "no_deadline",
          "bad_headers",
          "null_status",
        ] as const;
        for (const kind of kinds) {
          await plant(admin, store.table, kind, kind);
          for (let i = 0; i < 2; i++) {
            const seen = await store.claim(kind, opts("p"));
            assert.deepEqual(
              seen.state === "in_flight" ? seen.fingerprint : seen,
              null,
              kind,
            );
            if (seen.state === "in_flight") assert.ok(seen.retryAfterMs >= 1);
          }
          for (const token of ["t", "x"]) {
            assert.equal(await store.extend(kind, token, 1000), "lost", kind);
            assert.equal(await store.complete(kind, token, ok), "lost", kind);
            assert.equal(await store.release(kind, token), "lost", kind);
          }
        }
        // The rows are as planted: nothing was taken over or rewritten.
        const rows = await admin.unsafe(
          `SELECT slot, version, state, fingerprint, token FROM ${store.table} ORDER BY slot`,
        );
        assert.equal(rows.length, kinds.length);
        for (const row of rows) assert.notEqual(row.fingerprint, "p");

        // Past its own expires_at, a poisoned row is absent like any other.
        await admin.unsafe(
          `UPDATE ${store.table} SET expires_at = statement_timestamp() - interval '1 second'
           WHERE slot = 'future_version'`,
        );
        const after = await store.claim("future_version", opts("p"));
        assert.equal(after.state, "acquired");
        if (after.state === "acquired") assert.equal(after.recovered, false);
      });
    }),
);

pgTest(
  "PostgresStore hands bodies out as plain Uint8Array views, not driver Buffers",
  () =>
    withSchema(async (schema) => {
      await withStore(schema, { max: 1 }, async (store) => {
        const claim = await store.claim("b", opts("b"));
        if (claim.state !== "acquired") throw new Error("not acquired");
        const body = new Uint8Array([0, 255, 1, 254, 92, 120]);
        await store.complete("b", claim.token, { ...ok, body });
        const replay = await store.claim("b", opts("b"));
        assert.equal(replay.state, "completed");
        if (replay.state !== "completed") return;
        const out = replay.response.body!;
        assert.equal(Object.getPrototypeOf(out), Uint8Array.prototype);
        assert.deepEqual([...out], [...body]);
        assert.deepEqual(replay.response.headers, ok.headers);
      });
    }),
);

Deno.test("PostgresStore validates its options and arguments eagerly", async () => {
  const sql = postgres("postgres://postgres@127.0.0.1:1/none", { max: 1 });
  try {
    for (const table of ["", "a.b.c", ".b", "a.", "x\0y", "t".repeat(49)]) {
      assert.throws(() => new PostgresStore({ sql, table }), TypeError, table);
    }
    assert.throws(() => new PostgresStore({ sql, timeoutMs: 0 }), RangeError);
    assert.throws(
      // @ts-expect-error: not a postgres.js instance
      () => new PostgresStore({ sql: {} }),
      TypeError,
    );
    const store = new PostgresStore({ sql, table: "é.t" });
    assert.equal(store.table, '"é"."t"');
    await assert.rejects(() => store.claim("", opts("f")), TypeError);
    await assert.rejects(
      () => store.claim("s", opts("f", { leaseMs: -1 })),
      RangeError,
    );
    await assert.rejects(
      () => store.claim("s", opts("f", { ttlMs: Number.NaN })),
      RangeError,
    );
    await assert.rejects(
      () => store.complete("s", "t", { status: 99, headers: [], body: null }),
      TypeError,
    );
    assert.ok(
      postgresMigration("a.b").includes('CREATE TABLE IF NOT EXISTS "a"."b"'),
    );
  } finally {
    await sql.end();
  }
});

pgTest(
  "PostgresStore gives one of 20 concurrent takeovers of an expired lease the slot",
  () =>
    withSchema(async (schema) => {
      await withStore(schema, { max: 20 }, async (store) => {
        for (let round = 0; round < 3; round++) {
          const slot = `takeover-${round}`;
          const first = await store.claim(slot, opts("old", { leaseMs: 1 }));
          assert.equal(first.state, "acquired");
          await sleep(10);
          const results = await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              store.claim(slot, opts(`fp-${i}`))),
          );
          const winners = results.filter((r) =>
            r.state === "acquired"
          );
          assert.equal(
            winners.length,
            1,
            JSON.stringify(results.map((r) => r.state)),
          );
          assert.equal(
            winners[0]?.state === "acquired" && winners[0].recovered,
            true,
          );
          for (const r of results) {
            if (r.state === "in_flight") {
              assert.match(r.fingerprint ?? "", /^fp-/);
            }
          }
        }
      });
    }),
);

pgTest(
  "PostgresStore answers a replay and a conflict without writing the row",
  () =>
    withSchema(async (schema, admin) => {
      await withStore(schema, { max: 2 }, async (store) => {
        const version = async (slot: string) =>
          (await admin.unsafe(
            `SELECT xmin::text AS v FROM ${store.table} WHERE slot = $1`,
            [slot],
          ))[0]?.v;
        const live = await store.claim("busy", opts("b"));
        assert.equal(live.state, "acquired");
        const before = await version("busy");
        assert.equal((await store.claim("busy", opts("b"))).state, "in_flight");
        assert.equal(
          await version("busy"),
          before,
          "a conflict writes no row version",
        );
        const done = await store.claim("done", opts("d"));
        if (done.state !== "acquired") throw new Error("unreachable");
        assert.equal(await store.complete("done", done.token, ok), "applied");
        const completed = await version("done");
        for (let i = 0; i < 3; i++) {
          assert.equal(
            (await store.claim("done", opts("d"))).state,
            "completed",
          );
        }
        assert.equal(
          await version("done"),
          completed,
          "a replay writes no row version",
        );
      });
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

// --- documented numbers and outcomes, on a scripted postgres.js ---------------

/**
 * A postgres.js stand-in: each statement gets `answer(kind, parameters)`,
 * its kind the statement's first word (`WITH` claims and sweeps, `UPDATE`
 * completes and extends, `DELETE` releases); `sent` lists the kinds.
 */
function scripted(
  answer: (kind: string, parameters: unknown[]) => Promise<unknown[]>,
) {
  const sent: string[] = [];
  const sql = {
    unsafe(text: string, parameters: unknown[] = []) {
      const kind = text.startsWith("WITH doomed")
        ? "sweep"
        : text.split(/\s/, 1)[0]!;
      sent.push(kind);
      return Object.assign(answer(kind, parameters), { cancel() {} });
    },
  } as unknown as PostgresSql;
  return { sql, sent };
}

const rows = (list: unknown[], count = list.length) =>
  Promise.resolve(Object.assign(list, { count }));

Deno.test("PostgresStore runs a claim that finds no row 4 times in all, then answers in flight", async () => {
  for (const [empty, state] of [[3, "acquired"], [4, "in_flight"]] as const) {
    let left = empty;
    const { sql, sent } = scripted((_kind, [, , token]) =>
      left-- > 0 ? rows([]) : rows([{ token, takeovers: 0 }])
    );
    const store = new PostgresStore({ sql });
    const claim = await store.claim("s", opts("fp"));
    assert.equal(claim.state, state, `${empty} empty answers`);
    assert.equal(sent.length, Math.min(empty + 1, 4));
    if (claim.state === "in_flight") {
      assert.deepEqual(claim, {
        state: "in_flight",
        fingerprint: null,
        retryAfterMs: 1,
      });
    }
  }
});

Deno.test("PostgresStore runs a claim again when the row it read was free, 4 times in all", async () => {
  let reads = 0;
  const { sql, sent } = scripted(() => (reads++, rows([{ free: true }])));
  const store = new PostgresStore({ sql });
  assert.equal((await store.claim("s", opts("fp"))).state, "in_flight");
  assert.equal(reads, 4);
  assert.deepEqual(sent, ["WITH", "WITH", "WITH", "WITH"]);
});

Deno.test("PostgresStore writes: one row changed is applied, none lost, a failure a StoreError", async () => {
  let answer: () => Promise<unknown[]> = () => rows([], 1);
  const { sql } = scripted(() => answer());
  const store = new PostgresStore({ sql });
  const writes = [
    () => store.complete("s", "t", ok),
    () => store.release("s", "t"),
    () => store.extend("s", "t", 1_000),
  ];
  for (const write of writes) assert.equal(await write(), "applied");
  answer = () => rows([], 0);
  for (const write of writes) assert.equal(await write(), "lost");
  answer = () => Promise.reject(new Error("ECONNRESET"));
  for (const write of writes) {
    const error = await write().then(() => null, (e) => e);
    assert.ok(error instanceof StoreError, String(error));
    assert.match(error.message, /outcome unknown/);
  }
});

Deno.test("PostgresStore.sweep() stops at the first batch that deletes fewer than batchSize (1,000 by default)", async () => {
  const sweep = async (expired: number, batchSize?: number) => {
    let left = expired;
    const batches: unknown[] = [];
    const { sql } = scripted((_kind, [size]) => {
      batches.push(size);
      const count = Math.min(left, size as number);
      left -= count;
      return rows([], count);
    });
    const store = new PostgresStore({ sql });
    const options = batchSize === undefined ? {} : { batchSize };
    return [await store.sweep(options), batches.length, batches[0]];
  };
  assert.deepEqual(await sweep(2, 3), [2, 1, 3]); // n − 1
  assert.deepEqual(await sweep(3, 3), [3, 2, 3]); // n: one more, empty
  assert.deepEqual(await sweep(4, 3), [4, 2, 3]); // n + 1
  assert.deepEqual(await sweep(999), [999, 1, 1_000]);
  assert.deepEqual(await sweep(1_000), [1_000, 2, 1_000]);
});

Deno.test("PostgresStore takes a table name of up to 48 bytes and a schema name of up to 63", () => {
  const { sql } = scripted(() => rows([]));
  const accepts = (table: string) => new PostgresStore({ sql, table }).table;
  const refuses = (table: string) =>
    assert.throws(() => new PostgresStore({ sql, table }), TypeError, table);
  accepts("t".repeat(47));
  accepts("t".repeat(48));
  refuses("t".repeat(49));
  accepts("é".repeat(24)); // bytes, not characters
  refuses("é".repeat(24) + "t");
  accepts(`${"s".repeat(62)}.t`);
  accepts(`${"s".repeat(63)}.t`);
  refuses(`${"s".repeat(64)}.t`);
  refuses(`${"é".repeat(32)}.t`);
});

Deno.test("PostgresStore gives a statement 2,000 ms by default", async () => {
  const timers: number[] = [];
  const real = globalThis.setTimeout;
  globalThis.setTimeout = ((_fn: () => void, ms = 0) => {
    timers.push(ms);
    return { ref() {}, unref() {} };
  }) as unknown as typeof setTimeout;
  try {
    let answer!: () => void;
    const { sql } = scripted((_kind, [, , token]) =>
      new Promise((resolve) => {
        answer = () => resolve(Object.assign([{ token }], { count: 1 }));
      })
    );
    const store = new PostgresStore({ sql });
    const claim = store.claim("s", opts("fp"));
    assert.deepEqual(timers, [2_000]);
    answer();
    assert.equal((await claim).state, "acquired");
  } finally {
    globalThis.setTimeout = real;
  }
});
