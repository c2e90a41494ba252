// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One app process for the waiting tests across processes: the middleware
 * with `waitForInFlight` on RedisStore or PostgresStore. Each handler run
 * asks the test's control server what to answer (`POST /run`, held by the
 * test until it opens the gate), and every event of the middleware is
 * posted to `/event`, so the test waits for states, never for durations.
 *
 *     deno run --allow-net --allow-env --allow-read tests/_support/wait_app.ts PORT redis|postgres PREFIX_OR_TABLE CONTROL_URL WAIT_MS
 *
 * @module
 */
import { createClient } from "redis";
import postgres from "postgres";
import { idempotency } from "../../mod.ts";
import type { IdempotencyStore } from "../../src/store.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";

const [port, kind, where, control, waitMs] = Deno.args;
let store: IdempotencyStore;
let close: () => Promise<unknown>;
if (kind === "redis") {
  const client = await createClient({
    url: Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379",
  }).connect();
  store = new RedisStore({ client, prefix: where! });
  close = () => client.quit();
} else {
  const sql = postgres(
    Deno.env.get("DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test",
    { max: 1, onnotice: () => {} },
  );
  store = new PostgresStore({ sql, table: where! });
  close = () => sql.end();
}

const server = Deno.serve(
  { hostname: "127.0.0.1", port: Number(port), onListen() {} },
  idempotency(async (req) => {
    const body = await req.text();
    const answer = await fetch(`${control}/run?port=${port}`, {
      method: "POST",
      body,
    });
    const { status, text } = await answer.json();
    return new Response(text, { status });
  }, {
    scope: "global",
    store,
    waitForInFlight: Number(waitMs),
    onEvent(event) {
      const { type } = event;
      const detail = "reason" in event
        ? event.reason
        : "via" in event
        ? event.via
        : "";
      fetch(`${control}/event?port=${port}&type=${type}&detail=${detail}`, {
        method: "POST",
      }).then((r) => r.body?.cancel(), () => {});
    },
  }),
);

Deno.addSignalListener("SIGTERM", async () => {
  await server.shutdown();
  await close();
  Deno.exit(0);
});
