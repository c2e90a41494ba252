// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `waitForInFlight` (waiting instead of 409) as a whole program: a retry
 * sent while the first request still runs waits for it and gets its
 * response, instead of a 409; then it stops.
 *
 *     deno run --allow-net=127.0.0.1 examples/wait.ts
 *
 * @module
 */
// deno-lint-ignore-file no-console
import { idempotency } from "@idempotent/http";

let payments = 0;
let started!: () => void;
const running = new Promise<void>((resolve) => started = resolve);
async function handler(req: Request): Promise<Response> {
  const { amount } = await req.json();
  started();
  await new Promise((resolve) => setTimeout(resolve, 200)); // the provider
  return Response.json({ id: `pay_${++payments}`, amount }, { status: 201 });
}

const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen() {} },
  idempotency(handler, {
    // One client in this example: one key space. A multi-tenant API scopes by
    // the authenticated caller's stable id.
    scope: "global",
    waitForInFlight: 10_000, // a duplicate waits up to 10 s for the first
    maxWaiting: 1_000, // past 1,000 waiting duplicates: 409 at once
  }),
);

const pay = () =>
  fetch(`http://127.0.0.1:${server.addr.port}/payments`, {
    method: "POST",
    headers: { "idempotency-key": "order-42" },
    body: JSON.stringify({ amount: 1999 }),
  });
const first = pay();
await running; // the retry arrives while the first request runs
const retry = await pay();
console.log(`first: ${(await first).status} ${await (await first).text()}`);
console.log(
  `retry: ${retry.status} ${await retry.text()}, replayed: ${
    retry.headers.get("idempotent-replayed")
  }`,
);
console.log(`payments made: ${payments}`);
await server.shutdown();
