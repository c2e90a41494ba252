// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Produces two of the problem answers of the README's "Status codes", and
 * checks them, body and all:
 *
 *     deno run examples/status_codes.ts
 *
 * @module
 */
// deno-lint-ignore-file no-console
import { idempotency } from "@idempotent/http";
import assert from "node:assert/strict";

let finish = () => {};
const finished = new Promise<void>((resolve) => finish = resolve);
let running = () => {};
const started = new Promise<void>((resolve) => running = resolve);
const guarded = idempotency(async () => {
  running();
  await finished;
  return Response.json({ id: "pay_1" }, { status: 201 });
}, {
  required: true,
  // A single-tenant example (one client): one key space. A multi-tenant API
  // returns the authenticated user's or API client's stable id.
  scope: "global",
});

const pay = (headers: Record<string, string>) =>
  guarded(
    new Request("http://localhost/payments", {
      method: "POST",
      headers,
      body: '{"amount":1999}',
    }),
  );

const missing = await pay({});
assert.equal(missing.status, 400);
assert.equal(missing.headers.get("content-type"), "application/problem+json");
assert.deepEqual(
  await missing.json(),
  JSON.parse(`
{
  "type": "https://jsr.io/@idempotent/http#problem-key-missing",
  "title": "Idempotency key required",
  "status": 400,
  "detail": "This endpoint requires an idempotency-key header.",
  "instance": "/payments",
  "code": "idempotency_key_missing",
  "retryable": false
}
`),
);
console.log("400 problem-key-missing");

const first = pay({ "Idempotency-Key": "order-42" });
await started;
const inFlight = await pay({ "Idempotency-Key": "order-42" });
assert.equal(inFlight.status, 409);
assert.ok(Number(inFlight.headers.get("retry-after")) >= 1);
assert.deepEqual(
  await inFlight.json(),
  JSON.parse(`
{
  "type": "https://jsr.io/@idempotent/http#problem-key-in-flight",
  "title": "Request in progress",
  "status": 409,
  "detail": "A request with this idempotency key is being processed. Retry it after it completes to get its response.",
  "instance": "/payments",
  "code": "idempotency_in_flight",
  "retryable": true
}
`),
);
console.log(
  `409 problem-key-in-flight, Retry-After: ${
    inFlight.headers.get("retry-after")
  }`,
);
finish();
assert.equal((await first).status, 201);
