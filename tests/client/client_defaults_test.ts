// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * No double run from the defaults (issue 29, item 10): behind the default
 * `/client`, a handler that charges and then answers 500 charges once,
 * because the middleware released its key (the terminal rule records only
 * cacheable answers) and the client does not retry 500. `retryStatuses:
 * [500]` is the user's choice, and then it charges twice; a handler that
 * widens `cacheable` gets its 500 replayed instead. The default statuses
 * are pinned around each edge: 409, 429, 499 to 505.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createIdempotentFetch } from "../../src/client/client.ts";
import { fakeClient, serve } from "./_client_fixtures.ts";

const noWait = () => Promise.resolve();

/** The newcomer's handler: the side effect first, then a 500. */
function chargeThen500() {
  const charges: number[] = [];
  const handler = async (req: Request) => {
    const { amount } = await req.json();
    charges.push(amount); // the card is charged…
    return Response.json({ error: "receipt printer jammed" }, { status: 500 });
  };
  return { charges, handler };
}

const charge = { method: "POST", body: JSON.stringify({ amount: 1999 }) };

Deno.test("the default /client behind idempotency(): a handler that charges then answers 500 charges exactly once", async () => {
  const { charges, handler } = chargeThen500();
  await using server = serve(handler);
  const send = createIdempotentFetch({ sleep: noWait });
  const result = await send(`${server.url}/payments`, charge);
  assert.equal(result.response.status, 500);
  await result.response.body?.cancel();
  assert.equal(result.attempts, 1);
  assert.equal(result.stopped?.reason, "not_retryable");
  assert.equal(
    result.stopped?.message,
    "Not retried: 500 is not in 'retryStatuses'",
  );
  assert.deepEqual(charges, [1999]);
});

Deno.test("retryStatuses: [500] is the user's choice: the released key runs the charge again; a handler that widens cacheable replays its 500 instead", async () => {
  const { charges, handler } = chargeThen500();
  await using server = serve(handler);
  const send = createIdempotentFetch({
    retryStatuses: [500],
    maxAttempts: 2,
    sleep: noWait,
  });
  const result = await send(`${server.url}/payments`, charge);
  assert.equal(result.response.status, 500);
  await result.response.body?.cancel();
  assert.equal(result.attempts, 2);
  assert.deepEqual(
    charges,
    [1999, 1999],
    "charged twice: the key was released",
  );

  // The rule the README states: once a side effect happened, answer 2xx or
  // widen `cacheable`. Widened, the 500 is recorded and the retry replays it.
  const widened = chargeThen500();
  await using recorded = serve(widened.handler, {
    cacheable: (response) => response.status < 600,
  });
  const again = await send(`${recorded.url}/payments`, charge);
  assert.equal(again.response.status, 500);
  assert.equal(again.replayed, true);
  await again.response.body?.cancel();
  assert.deepEqual(widened.charges, [1999]);
});

Deno.test("createIdempotentFetch() by default retries 409, 429, 502, 503 and 504, and not 499, 500, 501 nor 505", async () => {
  const expected: Record<number, boolean> = {
    409: true,
    429: true,
    499: false,
    500: false,
    501: false,
    502: true,
    503: true,
    504: true,
    505: false,
  };
  for (const [status, retried] of Object.entries(expected)) {
    const client = fakeClient(
      () => new Response(null, { status: Number(status) }),
      { maxAttempts: 2 },
    );
    const result = await client.post();
    assert.equal(result.attempts, retried ? 2 : 1, status);
    assert.equal(client.calls(), retried ? 2 : 1, status);
    assert.equal(
      result.stopped?.reason,
      retried ? "attempts" : "not_retryable",
      status,
    );
  }
});

Deno.test("createIdempotentFetch(): retryStatuses replaces the default 502 and 504, never the always-retried 409, 429 and 503", async () => {
  const retries = async (status: number, retryStatuses: number[]) => {
    const client = fakeClient(() => new Response(null, { status }), {
      maxAttempts: 2,
      retryStatuses,
    });
    return (await client.post()).attempts === 2;
  };
  assert.equal(await retries(500, [500]), true);
  assert.equal(await retries(502, [500]), false);
  assert.equal(await retries(504, [500]), false);
  for (const always of [409, 429, 503]) {
    assert.equal(await retries(always, []), true, `${always}`);
  }
  assert.equal(await retries(502, []), false);
});
