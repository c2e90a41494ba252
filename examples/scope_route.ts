// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Keys per route, as a whole server on 127.0.0.1:8000: the
 * same key on `/payments` and on `/refunds` names two operations, as with
 * the peers that key by route, instead of a 422.
 *
 *     deno run --allow-net examples/scope_route.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";

const guarded = idempotency(handler, {
  // The account (resolved after authentication), then the method and path: a
  // key is per account and per route.
  scope: (req) =>
    JSON.stringify([accountOf(req), req.method, new URL(req.url).pathname]),
  // Webhooks carry their own delivery ids: leave them alone.
  skip: (req) => new URL(req.url).pathname.startsWith("/webhooks/"),
});

Deno.serve({ hostname: "127.0.0.1", port: 8000 }, guarded);
