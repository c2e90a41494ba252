// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's FailoverStore snippet as a whole server, on 127.0.0.1:8000:
 * Redis at `REDIS_URL` first, PostgreSQL at `DATABASE_URL` while Redis is down,
 * with `/otel`'s one wiring: a Redis outage is a `fallback` log line and an
 * `idempotency.failover.fallbacks` count.
 *
 *     deno run --allow-net --allow-env examples/failover.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { idempotencyTelemetry } from "@idempotent/http/otel";
import { FailoverStore } from "@idempotent/http/failover";
import { RedisStore } from "@idempotent/http/redis";
import { PostgresStore } from "@idempotent/http/postgres";
import { createClient } from "redis";
import postgres from "postgres";

const redis = createClient({
  url: Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379",
  disableOfflineQueue: true, // fail fast while Redis is down, queue nothing
});
redis.on("error", () => {}); // reconnects on its own; claims fall back meanwhile
await redis.connect();
const url = Deno.env.get("DATABASE_URL") ??
  "postgres://postgres@127.0.0.1/test";
const sql = postgres(url);

const store = new FailoverStore({
  primary: new RedisStore({ client: redis, timeoutMs: 250 }),
  fallback: new PostgresStore({ sql }),
});
await store.migrate(); // creates the PostgreSQL table: without it, new keys get 503
// Metrics (exported under OTEL_DENO=true); the log lines stay on beside them.
const telemetry = idempotencyTelemetry();
const guarded = idempotency(handler, {
  store: telemetry.store(store), // times it, counts its fallbacks
  scope: accountOf, // the account the request acts for, after authentication
  onEvent: telemetry.onEvent,
});
Deno.serve({ hostname: "127.0.0.1", port: 8000 }, guarded);
