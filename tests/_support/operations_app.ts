// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The app of tests/operations_test.ts: the README's store snippets
 * (examples/redis.ts, examples/postgres.ts, examples/failover.ts) around the
 * examples' payments handler, with the `/otel` wiring of docs/operations.md
 * (`store: telemetry.store(store)`, `onEvent: telemetry.onEvent`) and nothing
 * else (no `logger`, no listener of its own). Run with
 * `--allow-net --allow-env`; `DENO_SERVE_ADDRESS` moves it off port 8000.
 *
 * - `RUNBOOK_STORE`: `redis` (RedisStore, prefix `myapp:idem:`), `postgres`
 *   (PostgresStore on `app.idempotency_keys`) or `failover` (FailoverStore:
 *   RedisStore, then PostgresStore on `idempotency_keys`).
 * - `REDIS_URL`, `DATABASE_URL`: the servers.
 * - `IDEMPOTENCY_KEYS`: when set, the `encryption` option, loaded with
 *   `importEncryptionKeys` (`id:BASE64,…`, the first seals).
 * - `RUNBOOK_HANG=1`: the first request's handler never returns (a payment
 *   provider that hangs); it prints `handler entered` first.
 *
 * @module
 */

import { accountOf, handler } from "../../examples/_payments.ts";
import {
  idempotency,
  type IdempotencyOptions,
  importEncryptionKeys,
} from "@idempotent/http";
import { FailoverStore } from "@idempotent/http/failover";
import { PostgresStore } from "@idempotent/http/postgres";
import { RedisStore } from "@idempotent/http/redis";
import { idempotencyTelemetry } from "@idempotent/http/otel";
import { createClient } from "redis";
import postgres from "postgres";

const kind = Deno.env.get("RUNBOOK_STORE");
const redisUrl = Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379";
const url = Deno.env.get("DATABASE_URL") ??
  "postgres://postgres@127.0.0.1/test";
const telemetry = idempotencyTelemetry();

async function storeOf(): Promise<IdempotencyOptions["store"]> {
  if (kind === "redis") {
    const client = createClient({ url: redisUrl });
    client.on("error", () => {}); // without a listener it never reconnects
    await client.connect();
    return new RedisStore({ client, prefix: "myapp:idem:" });
  }
  if (kind === "postgres") {
    const sql = postgres(url);
    const store = new PostgresStore({ sql, table: "app.idempotency_keys" });
    await store.migrate(); // creates what is missing; safe from every instance
    return store;
  }
  if (kind === "failover") {
    const redis = createClient({
      url: redisUrl,
      disableOfflineQueue: true, // fail fast while Redis is down, queue nothing
    });
    redis.on("error", () => {}); // reconnects on its own; claims fall back meanwhile
    await redis.connect();
    const sql = postgres(url);
    const store = new FailoverStore({
      primary: new RedisStore({ client: redis, timeoutMs: 250 }),
      fallback: new PostgresStore({ sql }),
    });
    await store.migrate(); // creates the PostgreSQL table: without it, new keys get 503
    return store;
  }
  throw new Error(`RUNBOOK_STORE must be redis, postgres or failover: ${kind}`);
}

/** The `encryption` option from `IDEMPOTENCY_KEYS`, if set. */
function encryptionOf(): Promise<IdempotencyOptions["encryption"]> | undefined {
  const text = Deno.env.get("IDEMPOTENCY_KEYS");
  return text === undefined ? undefined : importEncryptionKeys(text);
}

let hang = Deno.env.get("RUNBOOK_HANG") === "1";
const payments = (req: Request): Promise<Response> => {
  if (!hang) return handler(req);
  hang = false;
  // deno-lint-ignore no-console
  console.log("handler entered");
  return new Promise<Response>(() => {});
};

const store = await storeOf();
const encryption = await encryptionOf();
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  idempotency(payments, {
    store: telemetry.store(store!), // times it, counts its fallbacks
    scope: accountOf, // the account the request acts for, after authentication
    ...(encryption ? { encryption } : {}),
    onEvent: telemetry.onEvent,
  }),
);
