// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore on ioredis, as a whole server on 127.0.0.1:8000, against the Redis
 * at `REDIS_URL` (ioredis reads the environment: `--allow-env`):
 *
 *     deno run --allow-net --allow-env examples/ioredis.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { RedisStore } from "@idempotent/http/redis";
import { Redis } from "ioredis"; // the named export: the default one does not type-check under Deno

const url = Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379";
const store = new RedisStore({ client: new Redis(url), prefix: "myapp:idem:" });
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(handler, { store, scope: accountOf }),
);
