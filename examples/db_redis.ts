// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore on `@db/redis` through a three-line adapter, as a whole server on
 * 127.0.0.1:8000.
 *
 * `@db/redis` is on JSR, which this project's CI cannot reach, so `redis`
 * here is a stand-in with its `sendCommand(command, args, options)` shape,
 * answering as `@db/redis` does with `returnUint8Arrays: true` (bulk strings
 * as bytes, integers as numbers, nil as `null`), over ioredis. With
 * `@db/redis`, `const redis = await connect({ hostname: "127.0.0.1" })`.
 *
 *     deno run --allow-net --allow-env examples/db_redis.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { type RedisCommander, RedisStore } from "@idempotent/http/redis";
import { Redis } from "ioredis";
import { Buffer } from "node:buffer";

const ioredis = new Redis(
  Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379",
);
const redis = {
  sendCommand: (
    command: string,
    args: (string | number | Uint8Array)[] = [],
    _options?: { returnUint8Arrays?: boolean },
  ): Promise<unknown> =>
    ioredis.callBuffer(
      command,
      ...args.map((a) => a instanceof Uint8Array ? Buffer.from(a) : String(a)),
    ),
};

const client: RedisCommander = {
  sendCommand: ([command, ...args]) =>
    redis.sendCommand(command as string, args, { returnUint8Arrays: true }),
};
const store = new RedisStore({ client, prefix: "myapp:idem:" });
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(handler, { store, scope: accountOf }),
);
