// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore against the PostgreSQL of this machine (`DATABASE_URL`): the
 * conformance suite, one statement per operation (counted on the wire), and
 * concurrent claims and takeovers. Migrations, names, sweeps and unreadable
 * rows are in `postgres_table_test.ts`, faults and undone claims in
 * `postgres_faults_test.ts`, outcomes on a scripted postgres.js in
 * `postgres_scripted_test.ts`.
 *
 * Every test works in a schema of its own, dropped afterwards.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { storeConformance } from "../../src/testing/testing.ts";
import type { PoisonKind } from "../../src/testing/testing.ts";
import { DATABASE_URL, uniquePrefix } from "../_support/services.ts";
import { sleep } from "../_support/time.ts";
import {
  connect,
  ignore,
  ok,
  opts,
  pgTest,
  plant,
  quiet,
  quote,
  withSchema,
  withStore,
} from "./_postgres_fixtures.ts";

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
