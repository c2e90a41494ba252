// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's RedisStore snippet (node-redis) as a whole server, on
 * 127.0.0.1:8000, against the Redis at `REDIS_URL`:
 *
 *     deno run --allow-net --allow-env examples/redis.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { RedisStore } from "@idempotent/http/redis";
import { createClient } from "redis"; // node-redis 5

const url = Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379";
const client = createClient({ url });
client.on("error", () => {}); // without a listener it never reconnects
await client.connect();
const store = new RedisStore({ client, prefix: "myapp:idem:" });
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(handler, { store, scope: accountOf }),
);
