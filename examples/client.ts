// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `@idempotent/http/client`, the retrying `fetch`: a payment whose first
 * response is lost on its way back (after the handler ran) is sent again
 * with the same key, and the retry gets the replay:
 *
 *     deno run --allow-net=127.0.0.1 examples/client.ts
 *
 * @module
 */
// deno-lint-ignore-file no-console
import { idempotency } from "@idempotent/http";
import { createIdempotentFetch } from "@idempotent/http/client";

let payments = 0;
const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen() {} },
  idempotency(
    () => Response.json({ id: `pay_${++payments}` }, { status: 201 }),
    // This server has one caller, the client below: one key space. A server
    // with users scopes by the authenticated user's stable id.
    { scope: "global" },
  ),
);

// A network that loses the first response after the server sent it.
let lost = 0;
async function lossyFetch(request: Request): Promise<Response> {
  const response = await fetch(request);
  if (lost++ > 0) return response;
  await response.body?.cancel();
  throw new TypeError("connection reset by peer");
}

const pay = createIdempotentFetch({
  fetch: lossyFetch, // omit it to use the global fetch
  maxAttempts: 4,
  timeout: 30_000,
});

const { response, key, attempts, replayed } = await pay(
  `http://127.0.0.1:${server.addr.port}/payments`,
  { method: "POST", body: JSON.stringify({ amount: 1999 }) },
);
console.log(`${response.status} ${await response.text()}`);
console.log(`attempts: ${attempts}, replayed: ${replayed}, key: ${key}`);

console.log(`payments made: ${payments}`);
await server.shutdown();
