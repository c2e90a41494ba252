// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The client's request and response bodies: a stream body buffered once and
 * sent again byte for byte, a FormData sent again with the same boundary,
 * `maxBodyBytes` and its default, and the bodies of answers it retries.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  createIdempotentFetch,
  IdempotentFetchError,
} from "../../src/client/client.ts";
import { frames, pattern, sameBytes } from "../_support/bytes.ts";
import { droppingFront, fakeClient, serve } from "./_client_fixtures.ts";

Deno.test("createIdempotentFetch() buffers a stream body once and sends it again byte for byte", async () => {
  const body = pattern(300_000, 7);
  const received: Uint8Array[] = [];
  await using server = serve(async (req) => {
    received.push(new Uint8Array(await req.arrayBuffer()));
    return new Response("stored", { status: 201 });
  });
  await using front = droppingFront(server.port, 1);
  const parts = [body.slice(0, 1), body.slice(1, 65_537), body.slice(65_537)];
  const send = createIdempotentFetch({ sleep: () => Promise.resolve() });
  const result = await send(`http://127.0.0.1:${front.port}/uploads`, {
    method: "POST",
    body: frames(parts),
    duplex: "half",
  } as RequestInit);
  assert.equal(result.response.status, 201);
  assert.equal(await result.response.text(), "stored");
  assert.equal(result.attempts, 2);
  assert.equal(result.replayed, true); // same bytes: same fingerprint
  assert.equal(received.length, 1);
  assert.ok(sameBytes(received[0]!, body));
});

Deno.test("createIdempotentFetch() refuses a stream body over maxBodyBytes before sending anything", async () => {
  let calls = 0;
  let cancelled = false;
  const send = createIdempotentFetch({
    maxBodyBytes: 10,
    fetch: () => {
      calls++;
      return new Response("no");
    },
  });
  const error = await send("http://api.test/uploads", {
    method: "POST",
    body: frames([pattern(6), pattern(5), pattern(100)], {
      onCancel: () => cancelled = true,
    }),
    idempotencyKey: "big-1",
  }).catch((e) => e);
  assert.ok(error instanceof IdempotentFetchError);
  assert.equal(error.reason, "body_too_large");
  assert.equal(error.key, "big-1");
  assert.equal(error.attempts, 0);
  assert.match(error.message, /'maxBodyBytes' \(10 bytes\)/);
  assert.equal(calls, 0);
  assert.equal(cancelled, true);
});

Deno.test("createIdempotentFetch() sends a FormData again with the same boundary (no 422 on the retry)", async () => {
  let runs = 0;
  await using server = serve(async (req) => {
    runs++;
    const form = await req.formData();
    return Response.json({ name: form.get("name") }, { status: 201 });
  });
  await using front = droppingFront(server.port, 1);
  const form = new FormData();
  form.set("name", "Ada");
  form.set("file", new Blob([pattern(1000)]), "a.bin");
  const result = await createIdempotentFetch({
    sleep: () => Promise.resolve(),
  })(`http://127.0.0.1:${front.port}/forms`, { method: "POST", body: form });
  assert.equal(result.response.status, 201);
  assert.deepEqual(await result.response.json(), { name: "Ada" });
  assert.equal(result.replayed, true);
  assert.equal(runs, 1);
});

Deno.test("createIdempotentFetch() keeps a stream body of maxBodyBytes and refuses one byte more", async () => {
  for (const [size, sent] of [[9, true], [10, true], [11, false]] as const) {
    const client = fakeClient(() => new Response("ok"), { maxBodyBytes: 10 });
    const outcome = await client.post({ body: frames([pattern(size)]) })
      .then((r) => r.stopped, (e) => e.reason);
    assert.equal(outcome, sent ? null : "body_too_large", `${size} bytes`);
    assert.equal(client.calls(), sent ? 1 : 0);
  }
});

Deno.test("createIdempotentFetch() by default keeps a stream body of 1 MiB and refuses one byte more", async () => {
  for (const [size, sent] of [[1_048_576, true], [1_048_577, false]] as const) {
    const client = fakeClient(() => new Response("ok"));
    const outcome = await client.post({ body: frames([pattern(size)]) })
      .then((r) => r.stopped, (e) => e.reason);
    assert.equal(outcome, sent ? null : "body_too_large", `${size} bytes`);
    assert.equal(client.calls(), sent ? 1 : 0);
  }
});

Deno.test("createIdempotentFetch() with maxAttempts 1 sends a stream body as it is, whatever maxBodyBytes", async () => {
  const sent: number[] = [];
  const client = fakeClient(() => new Response("ok"), {
    maxAttempts: 1,
    maxBodyBytes: 10,
    fetch: async (request) => {
      sent.push((await request.arrayBuffer()).byteLength);
      return new Response("ok");
    },
  });
  const result = await client.post({ body: frames([pattern(11)]) });
  assert.equal(result.stopped, null);
  assert.deepEqual(sent, [11]);
});

Deno.test("createIdempotentFetch() cancels the body of each answer it retries, and leaves the last one's unread", async () => {
  const cancelled: number[] = [];
  const client = fakeClient((attempt) =>
    new Response(
      frames([pattern(8)], { onCancel: () => cancelled.push(attempt) }),
      { status: attempt < 3 ? 503 : 201 },
    ), { maxAttempts: 3 });
  const result = await client.post();
  assert.equal(result.response.status, 201);
  assert.deepEqual(cancelled, [1, 2]);
  assert.equal((await result.response.arrayBuffer()).byteLength, 8);
});
