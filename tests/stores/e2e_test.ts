// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware end to end on every real store: two middleware instances
 * sharing one store (as two app instances would), concurrent duplicates,
 * byte-exact replays of large binary bodies, repeated Set-Cookie, and an
 * overflow recorded without its body.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createClient } from "redis";
import { idempotency, slotOf } from "../../mod.ts";
import type { IdempotencyStore } from "../../src/store.ts";
import { KvStore } from "../../src/stores/kv.ts";
import { MysqlStore } from "../../src/stores/mysql.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import {
  POSTGRES_IGNORE,
  postgresStore,
  REDIS_IGNORE,
  REDIS_URL,
  testName,
  uniquePrefix,
} from "../_support/services.ts";
import { deferred } from "../_support/time.ts";
import { pattern, sameBytes } from "../_support/bytes.ts";
import { deleteRedisKeys } from "../_support/redis.ts";
import { MYSQL_IGNORE, mysqlPool } from "../_support/mariadb.ts";

interface Target {
  store: IdempotencyStore;
  close(): Promise<void>;
}

function request(key: string, body: string | Uint8Array<ArrayBuffer> = "{}") {
  return new Request("http://api.test/orders", {
    method: "POST",
    headers: { "idempotency-key": key },
    body,
  });
}

/** Registers the end-to-end cases for one store. */
export function middlewareOn(
  name: string,
  ignore: false | string,
  setup: () => Promise<Target>,
): void {
  Deno.test({
    name: testName(`idempotency() end to end on ${name}`, ignore),
    ignore: ignore !== false,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      const target = await setup();
      const run = crypto.randomUUID().slice(0, 8);
      try {
        await t.step(
          "two instances sharing the store run 30 concurrent duplicates once",
          async () => {
            // However long the machine takes, a duplicate that arrives
            // while the first runs gets 409 and one that arrives after it
            // completed gets the replay: both are right, so the handler's
            // duration does not matter.
            let runs = 0;
            const handler = async (req: Request) => {
              runs++;
              return Response.json({ order: await req.json(), n: runs }, {
                status: 201,
              });
            };
            const a = idempotency(handler, {
              scope: "global",
              store: target.store,
            });
            const b = idempotency(handler, {
              scope: "global",
              store: target.store,
            });
            const answers = await Promise.all(
              Array.from(
                { length: 30 },
                (_, i) => (i % 2 ? a : b)(request(`${run}-dup`, '{"sku":1}')),
              ),
            );
            assert.equal(runs, 1);
            const kinds = answers.map((r) =>
              r.status === 201
                ? r.headers.get("idempotent-replayed") === "true"
                  ? "replay"
                  : "live"
                : String(r.status)
            );
            assert.equal(
              kinds.filter((k) => k === "live").length,
              1,
              kinds.join(),
            );
            assert.ok(
              kinds.every((k) => k === "live" || k === "replay" || k === "409"),
              kinds.join(),
            );
            const bodies = await Promise.all(
              answers.map((r) =>
                r.status === 201 ? r.text() : r.body?.cancel()
              ),
            );
            const winner = bodies[kinds.indexOf("live")];
            for (const [i, kind] of kinds.entries()) {
              if (kind === "replay") assert.equal(bodies[i], winner);
            }
            const replay = await b(request(`${run}-dup`, '{"sku":1}'));
            assert.equal(replay.headers.get("idempotent-replayed"), "true");
            assert.equal(await replay.text(), winner);
          },
        );

        await t.step(
          "a 1 MiB binary body and many Set-Cookie headers replay exactly",
          async () => {
            const body = pattern(1_048_576, 31);
            const guarded = idempotency(() => {
              const headers = new Headers({
                "content-type": "application/octet-stream",
              });
              for (let i = 0; i < 20; i++) {
                headers.append("set-cookie", `s${i}=${i}; Path=/`);
              }
              return new Response(body, { headers });
            }, {
              scope: "global",
              store: target.store,
              storeSetCookie: true,
            });
            const first = await guarded(request(`${run}-mib`));
            assert.ok(
              sameBytes(new Uint8Array(await first.arrayBuffer()), body),
            );
            const replay = await guarded(request(`${run}-mib`));
            assert.ok(
              sameBytes(new Uint8Array(await replay.arrayBuffer()), body),
            );
            assert.deepEqual(
              replay.headers.getSetCookie(),
              first.headers.getSetCookie(),
            );
          },
        );

        await t.step(
          "an overflow streams in full and replays without a body",
          async () => {
            const body = pattern(2_000_000, 32);
            const guarded = idempotency(() => new Response(body), {
              scope: "global",
              store: target.store,
            });
            assert.ok(
              sameBytes(
                new Uint8Array(
                  await (await guarded(request(`${run}-big`))).arrayBuffer(),
                ),
                body,
              ),
            );
            const replay = await guarded(request(`${run}-big`));
            assert.equal(
              replay.headers.get("idempotent-body-omitted"),
              "too_large",
            );
            assert.equal((await replay.arrayBuffer()).byteLength, 0);
          },
        );

        await t.step(
          "a key reused with another body is 422 across instances",
          async () => {
            const store = target.store;
            await (await idempotency(() => new Response("x"), {
              scope: "global",
              store,
            })(
              request(`${run}-fp`, "a"),
            )).text();
            const other = await idempotency(() => new Response("y"), {
              scope: "global",
              store,
            })(
              request(`${run}-fp`, "b"),
            );
            assert.equal(other.status, 422);
            await other.body?.cancel();
          },
        );
      } finally {
        await target.close();
      }
    },
  });
}

middlewareOn("KvStore", false, async () => {
  const kv = await Deno.openKv(":memory:");
  return {
    store: new KvStore({ kv }),
    close: () => Promise.resolve(kv.close()),
  };
});

middlewareOn("RedisStore", REDIS_IGNORE, async () => {
  const client = await createClient({ url: REDIS_URL }).connect();
  const prefix = `${uniquePrefix("e2e")}:`;
  return {
    store: new RedisStore({ client, prefix }),
    async close() {
      await deleteRedisKeys(prefix);
      await client.quit();
    },
  };
});

middlewareOn("PostgresStore", POSTGRES_IGNORE, async () => {
  const { store, drop } = await postgresStore("e2e");
  return { store, close: drop };
});

middlewareOn("MysqlStore", MYSQL_IGNORE, async () => {
  const pool = mysqlPool({ connectionLimit: 8 });
  const table = uniquePrefix("e2e");
  const store = new MysqlStore({ pool, table });
  await store.migrate();
  return {
    store,
    async close() {
      await pool.query(`DROP PROCEDURE IF EXISTS \`${table}_claim_v1\``);
      await pool.query(`DROP TABLE IF EXISTS \`${table}\``);
      await pool.end();
    },
  };
});

Deno.test({
  name: testName(
    "idempotency() on a PostgresStore with a pool of one serves concurrent requests while handlers run",
    POSTGRES_IGNORE,
  ),
  ignore: POSTGRES_IGNORE !== false,
  async fn() {
    const { store, drop } = await postgresStore("pool1", { max: 1 });
    try {
      // Each handler waits until all ten are inside: that can only happen if
      // no claim holds the one connection while its handler runs. If one
      // did, they would wait for ever; the bound turns that into a failure.
      let inside = 0;
      let most = 0;
      const all = deferred();
      const stuck = setTimeout(all.resolve, 30_000);
      const guarded = idempotency(async () => {
        inside++;
        most = Math.max(most, inside);
        if (inside === 10) all.resolve();
        await all.promise;
        inside--;
        return new Response("done", { status: 201 });
      }, { scope: "global", store });
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => guarded(request(`k${i}`))),
      );
      assert.deepEqual(answers.map((r) => r.status), Array(10).fill(201));
      await Promise.all(answers.map((r) => r.text()));
      clearTimeout(stuck);
      assert.equal(
        most,
        10,
        "all ten handlers ran at once: no connection was held while one ran",
      );
    } finally {
      await drop();
    }
  },
});

Deno.test("idempotency() on a RedisStore whose Redis is unreachable answers 503, or runs the handler with failOpen", async () => {
  // A closed port: connection refused at once. No offline queue, so commands fail instead of waiting.
  const client = createClient({
    url: "redis://127.0.0.1:1",
    disableOfflineQueue: true,
    socket: { reconnectStrategy: false },
  });
  client.on("error", () => {});
  await client.connect().catch(() => {});
  const store = new RedisStore({ client, timeoutMs: 500 });
  let runs = 0;
  const handler = () => {
    runs++;
    return new Response("ran", { status: 201 });
  };
  const closed = await idempotency(handler, { scope: "global", store })(
    request("down"),
  );
  assert.equal(closed.status, 503);
  assert.equal(closed.headers.get("retry-after"), "1");
  assert.equal(
    (await closed.json()).type,
    "https://jsr.io/@idempotent/http#problem-store-unavailable",
  );
  assert.equal(runs, 0);
  const open = await idempotency(handler, {
    scope: "global",
    store,
    failOpen: true,
  })(
    request("down"),
  );
  assert.equal(open.status, 201);
  assert.equal(await open.text(), "ran");
  assert.equal(runs, 1);
});

Deno.test("idempotency() answers 500 unreadable (no Retry-After) to a key whose stored value is unreadable, and never runs the handler", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore({ kv });
  // A value no store of ours wrote, where the record for this key lives.
  await kv.set(["idempotency", "rec", slotOf("", "poisoned")], "not a record");
  let runs = 0;
  const events: string[] = [];
  const guarded = idempotency(() => {
    runs++;
    return new Response("ran");
  }, {
    scope: "global",
    store,
    onEvent: (event) => {
      if (event.type === "conflict") {
        events.push(`conflict:${event.unreadable}`);
      }
    },
  });
  for (let i = 0; i < 2; i++) {
    const res = await guarded(request("poisoned"));
    assert.equal(res.status, 500);
    assert.equal(res.headers.get("retry-after"), null);
    assert.equal(
      (await res.json()).type,
      "https://jsr.io/@idempotent/http#problem-record-unreadable",
    );
  }
  assert.equal(runs, 0);
  assert.deepEqual(events, ["conflict:true", "conflict:true"]);
});
