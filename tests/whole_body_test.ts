// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Bodies read in one call, without a stream: a request `Deno.serve` bounds by
 * its `Content-Length`, a response body held in memory. The bound, the body's
 * integrity and the capture's outcomes stay those of the streamed reads.
 *
 * @module
 */
import assert from "node:assert/strict";
import { idempotency, MemoryStore, PROBLEM_TYPES } from "../mod.ts";
import { readBody, served } from "../src/_request.ts";
import { responseBody } from "../src/_response.ts";
import { frames } from "./_support/bytes.ts";
import { post, serveLocal } from "./_support/http.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const NEVER = () => new Promise<void>(() => {});
const NO_STOP = () => {
  throw new Error("a body held in memory needs no capture");
};

Deno.test("served() knows Deno.serve's requests from requests built in code", async () => {
  const seen: boolean[] = [];
  await using server = serveLocal(async (req) => {
    seen.push(served(req));
    const copy = new Request(req.url, { method: "POST", headers: req.headers });
    seen.push(served(copy));
    await req.body?.cancel();
    return new Response("ok");
  });
  const res = await fetch(server.url, { method: "POST", body: "abc" });
  await res.text();
  assert.deepEqual(seen, [true, false]);
  assert.equal(served(post("k", "abc")), false);
});

/** Raw HTTP/1.1 to `port`: what the server answered, once it closes. */
async function raw(port: number, text: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(encoder.encode(text));
  let answer = "";
  const buffer = new Uint8Array(4096);
  for (;;) {
    const n = await conn.read(buffer).catch(() => null);
    if (n === null) break;
    answer += decoder.decode(buffer.subarray(0, n));
  }
  conn.close();
  return answer;
}

Deno.test("readBody() of a served request reads its Content-Length, not the bytes after it", async () => {
  const bodies: string[] = [];
  await using server = serveLocal(async (req) => {
    const body = await readBody(req, 1024);
    assert.ok(body instanceof Uint8Array);
    bodies.push(decoder.decode(body));
    return new Response("ok");
  });
  const answer = await raw(
    server.port,
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" +
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabcdef",
  );
  assert.deepEqual(bodies, ["hello", "abc"]);
  assert.equal(answer.match(/HTTP\/1\.1 200/g)?.length, 2);
});

Deno.test("readBody() of a served request over maxRequestBytes by its Content-Length is too_large, unread", async () => {
  const outcomes: unknown[] = [];
  await using server = serveLocal(async (req) => {
    outcomes.push(await readBody(req, 4));
    return new Response("ok");
  });
  const res = await fetch(server.url, { method: "POST", body: "hello" });
  await res.text();
  assert.deepEqual(outcomes, [{ outcome: "too_large" }]);
});

/** A request built in code whose state passes for the server's. */
function passedOffAsServed(request: Request): Request {
  const key = Object.getOwnPropertySymbols(request).find((symbol) =>
    symbol.description === "request"
  )!;
  class InnerRequest {}
  const state = (request as unknown as Record<symbol, object>)[key]!;
  Object.setPrototypeOf(state, InnerRequest.prototype);
  assert.ok(served(request));
  return request;
}

Deno.test("a served body whose length is not its Content-Length is a 400, with nothing claimed", async () => {
  const store = new FaultyStore(new MemoryStore());
  let runs = 0;
  const guarded = idempotency(() => {
    runs++;
    return new Response("ran", { status: 201 });
  }, { scope: "global", store });
  for (const declared of ["3", "9"]) {
    const res = await guarded(passedOffAsServed(
      new Request("http://api.test/payments", {
        method: "POST",
        headers: { "idempotency-key": "k", "content-length": declared },
        body: frames([encoder.encode("abc"), encoder.encode("def")]),
        // @ts-ignore: `duplex` is required for a stream body, missing from the lib types
        duplex: "half",
      }),
    ));
    assert.equal(res.status, 400);
    assert.equal((await res.json()).type, PROBLEM_TYPES.incomplete);
  }
  const whole = await guarded(passedOffAsServed(post("k", "abcdef", {
    headers: { "content-length": "6" },
  })));
  assert.equal(whole.status, 201);
  await whole.body?.cancel();
  assert.equal(runs, 1);
  assert.equal(store.calls.claim, 1);
});

Deno.test("responseBody() reads a body held in memory whole, without a capture", async () => {
  const json = { id: "pay_1", note: "é" };
  for (
    const [response, expected] of [
      [new Response("abc"), "abc"],
      [new Response("abc", { headers: { "content-type": "a/b" } }), "abc"],
      [new Response(encoder.encode("héllo")), "héllo"],
      [Response.json(json), JSON.stringify(json)],
      [new Response(new URLSearchParams("a=1&b=2")), "a=1&b=2"],
    ] as const
  ) {
    const body = await responseBody(response, 1024, NO_STOP);
    assert.equal(body?.outcome, "within");
    assert.ok(body.outcome === "within");
    assert.equal(decoder.decode(body.bytes), expected);
    assert.ok(body.bytes.buffer instanceof ArrayBuffer);
  }
  // As the middleware reads it: its headers first.
  const read = Response.json(json);
  assert.equal(read.headers.get("content-type"), "application/json");
  const body = await responseBody(read, 1024, NO_STOP);
  assert.ok(body?.outcome === "within");
  assert.equal(decoder.decode(body.bytes), JSON.stringify(json));
  assert.equal(
    await responseBody(new Response(null, { status: 204 }), 8, NO_STOP),
    null,
  );
});

Deno.test("responseBody() of a body in memory keeps the cap: exactly cap is within, one byte more overflows", async () => {
  const at = await responseBody(new Response("x".repeat(8)), 8, NO_STOP);
  assert.ok(at?.outcome === "within");
  assert.equal(at.bytes.byteLength, 8);
  const over = await responseBody(new Response("y".repeat(9)), 8, NO_STOP);
  assert.ok(over?.outcome === "overflow");
  assert.equal(over.omitted, "too_large");
  assert.equal(await new Response(over.live).text(), "y".repeat(9));
});

Deno.test("responseBody() streams what is not in memory: a stream, a Blob, a body already touched", async () => {
  const touched = new Response("abc");
  assert.ok(touched.body !== null);
  let stops = 0;
  const stop = () => {
    stops++;
    return NEVER();
  };
  for (
    const response of [
      new Response(frames([encoder.encode("ab"), encoder.encode("c")])),
      new Response(new Blob(["abc"])),
      touched,
    ]
  ) {
    const body = await responseBody(response, 1024, stop);
    assert.ok(body?.outcome === "within");
    assert.equal(decoder.decode(body.bytes), "abc");
  }
  assert.equal(stops, 3);
  const used = new Response("abc");
  await used.text();
  const failed = await responseBody(used, 1024, stop);
  assert.equal(failed?.outcome, "failed");
});

Deno.test("idempotency() records a body held in memory and replays it byte for byte", async () => {
  const guarded = idempotency(
    () => Response.json({ id: "pay_1", amount: 1999 }, { status: 201 }),
    { scope: "global", store: new MemoryStore(), maxResponseBytes: 64 },
  );
  const first = await guarded(post("json", "{}"));
  const replay = await guarded(post("json", "{}"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(await replay.text(), await first.text());
  const big = idempotency(() => new Response("z".repeat(65)), {
    scope: "global",
    store: new MemoryStore(),
    maxResponseBytes: 64,
  });
  const live = await big(post("big", "{}"));
  assert.equal(await live.text(), "z".repeat(65));
  const again = await big(post("big", "{}"));
  assert.equal(again.headers.get("idempotent-body-omitted"), "too_large");
  await again.body?.cancel();
});
