// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The request path in process: a bare handler as the baseline beside the
 * same handler under the middleware, keyless, with a fresh key, and replayed,
 * on the MemoryStore. The difference of the averages is what the middleware
 * adds per request.
 *
 *     deno task bench bench/middleware_bench.ts
 *
 * @module
 */

import { idempotency, MemoryStore } from "../mod.ts";
import { handler, payload } from "./_app.ts";

const store = new MemoryStore({
  maxEntries: 10_000_000,
  maxBytes: 4_000_000_000,
});
const guarded = idempotency(handler, { scope: "global", store });

function request(key: string | null): Request {
  const headers: Record<string, string> = {
    "content-type": "application/json",
  };
  if (key !== null) headers["idempotency-key"] = key;
  return new Request("http://localhost/payments", {
    method: "POST",
    headers,
    body: payload,
  });
}

await (await guarded(request("replayed"))).arrayBuffer();
let n = 0;

Deno.bench(
  { name: "bare handler", group: "request", baseline: true },
  async () => {
    await (await handler(request(null))).arrayBuffer();
  },
);

Deno.bench({ name: "keyless (call-through)", group: "request" }, async () => {
  await (await guarded(request(null))).arrayBuffer();
});

Deno.bench({ name: "fresh key", group: "request" }, async () => {
  await (await guarded(request(`k${n++}`))).arrayBuffer();
});

Deno.bench({ name: "replay", group: "request" }, async () => {
  await (await guarded(request("replayed"))).arrayBuffer();
});
