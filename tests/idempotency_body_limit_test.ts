// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The request body's bounds: `maxRequestBytes` at n-1/n/n+1, declared or
 * streamed, a Content-Length refused unread, the 1 MiB default, a body read
 * before the middleware, and an empty body handed on as none. The rest of
 * the protocol is in `idempotency_protocol_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency, PROBLEM_TYPES } from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { pattern } from "./_support/bytes.ts";
import { post } from "./_support/http.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";
import { counting } from "./_support/idempotency.ts";

/** A POST of `size` bytes in frames of 40, its Content-Length `declared`. */
function sized(key: string, size: number, declared: string | null) {
  const body = pattern(size, 3);
  let at = 0;
  let pulled = 0;
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull(controller) {
      pulled++;
      if (at >= size) return controller.close();
      controller.enqueue(body.slice(at, at += 40));
    },
    cancel() {
      cancelled = true;
    },
  }, { highWaterMark: 0 });
  const request = new Request("http://api.test/payments", {
    method: "POST",
    headers: {
      "idempotency-key": key,
      ...(declared === null ? {} : { "content-length": declared }),
    },
    body: stream,
    // @ts-ignore: `duplex` is required for a stream body, missing from the lib types
    duplex: "half",
  });
  return { request, pulled: () => pulled, cancelled: () => cancelled };
}

Deno.test("idempotency() takes a body of exactly maxRequestBytes, declared or streamed, and answers 413 to one byte more", async () => {
  const seen: number[] = [];
  const { state, handler } = counting(async (req) => {
    seen.push((await req.arrayBuffer()).byteLength);
    return new Response("ok");
  });
  const store = new FaultyStore(new MemoryStore());
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    maxRequestBytes: 100,
  });
  for (const size of [99, 100, 101]) {
    for (const declared of [`${size}`, null]) {
      const { request, cancelled } = sized(
        `${size}-${declared}`,
        size,
        declared,
      );
      const res = await guarded(request);
      const expected = size <= 100 ? 200 : 413;
      assert.equal(res.status, expected, `${size} bytes, declared ${declared}`);
      // A body refused is cancelled, so the connection's rest is not read.
      assert.equal(cancelled(), expected === 413, `${size}, ${declared}`);
      await res.body?.cancel();
    }
  }
  assert.deepEqual(seen, [99, 99, 100, 100]);
  assert.equal(state.runs, 4);
  assert.equal(store.calls.claim, 4);
});

Deno.test("idempotency() answers 413 to a declared Content-Length over maxRequestBytes without reading the body, and trusts only digits", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const guarded = idempotency(handler, {
    scope: "global",
    maxRequestBytes: 100,
  });
  const over = sized("declared-101", 50, "101");
  const res = await guarded(over.request);
  assert.equal(res.status, 413);
  assert.equal(over.pulled(), 0, "the body was never read");
  assert.equal(over.cancelled(), true, "the body was cancelled");
  assert.equal((await res.json()).type, PROBLEM_TYPES.tooLarge);
  // Not digits: not a length, so the body is read and counted.
  for (const declared of ["1e3", "+101", "0x100"]) {
    const odd = sized(`odd-${declared}`, 50, declared);
    const answer = await guarded(odd.request);
    assert.equal(answer.status, 200, `Content-Length: ${declared}`);
    await answer.body?.cancel();
  }
  assert.equal(state.runs, 3);
});

Deno.test("idempotency() by default takes a request body of 1 MiB and answers 413 to one byte more", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const guarded = idempotency(handler, { scope: "global" });
  for (const [size, status] of [[1_048_576, 200], [1_048_577, 413]] as const) {
    for (const declared of [`${size}`, null]) {
      const { request } = sized(`mib-${size}-${declared}`, size, declared);
      const res = await guarded(request);
      assert.equal(res.status, status, `${size} bytes, declared ${declared}`);
      await res.body?.cancel();
    }
  }
  assert.equal(state.runs, 2);
});

Deno.test("idempotency() refuses a request whose body was read before it, naming where to read it", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const store = new FaultyStore(new MemoryStore());
  const guarded = idempotency(handler, { scope: "global", store });
  const request = post("read");
  await request.text();
  await assert.rejects(
    async () => await guarded(request),
    /^TypeError: The request body was read before idempotency\(\): read it in the handler$/,
  );
  assert.equal(state.runs, 0);
  assert.equal(store.calls.claim, 0);
});

Deno.test("idempotency() hands the handler an empty body as no body at all", async () => {
  const seen: (ReadableStream | null)[] = [];
  const guarded = idempotency((req) => {
    seen.push(req.body);
    return new Response("ok");
  }, { scope: "global" });
  await (await guarded(post("empty", ""))).text();
  assert.deepEqual(seen, [null]);
});
