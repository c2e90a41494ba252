// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware under a real `Deno.serve` on loopback, driven by `fetch`:
 * what crosses the wire, not just what the handler returns.
 *
 * @module
 */
import assert from "node:assert/strict";
import { idempotency, type IdempotencyOptions } from "../mod.ts";
import { deferred } from "./_support/time.ts";
import { type LocalServer, serveLocal } from "./_support/http.ts";
import { pattern, sameBytes } from "./_support/bytes.ts";

function serve(
  handler: (req: Request) => Response | Promise<Response>,
  options: Partial<IdempotencyOptions> = {},
): LocalServer {
  return serveLocal(idempotency(handler, { scope: "global", ...options }));
}

function send(url: string, key: string, body = "{}"): Promise<Response> {
  return fetch(`${url}/payments`, {
    method: "POST",
    headers: { "idempotency-key": key, "content-type": "application/json" },
    body,
  });
}

Deno.test("idempotency() over HTTP replays the same bytes with a consistent Content-Length, again and again", async () => {
  const body = pattern(200_000, 21);
  let runs = 0;
  await using server = serve(() => {
    runs++;
    return new Response(body, {
      status: 201,
      headers: {
        "content-type": "application/octet-stream",
        "x-run": String(runs),
      },
    });
  });
  const first = await send(server.url, "wire");
  assert.equal(first.status, 201);
  assert.ok(sameBytes(new Uint8Array(await first.arrayBuffer()), body));
  for (let i = 0; i < 3; i++) {
    const replay = await send(server.url, "wire");
    assert.equal(replay.status, 201);
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.equal(replay.headers.get("x-run"), "1");
    assert.equal(replay.headers.get("content-length"), String(body.byteLength));
    assert.ok(
      sameBytes(new Uint8Array(await replay.arrayBuffer()), body),
      `replay ${i} bytes`,
    );
  }
  assert.equal(runs, 1);
});

Deno.test("idempotency() over HTTP streams an oversized body intact and replays it without a body", async () => {
  const body = pattern(3 * 1024 * 1024 + 5, 22);
  await using server = serve(() => new Response(body), {
    maxResponseBytes: 64 * 1024,
  });
  const first = await send(server.url, "huge");
  assert.ok(sameBytes(new Uint8Array(await first.arrayBuffer()), body));
  const replay = await send(server.url, "huge");
  assert.equal(replay.status, 200);
  assert.equal(replay.headers.get("idempotent-body-omitted"), "too_large");
  assert.equal((await replay.arrayBuffer()).byteLength, 0);
});

Deno.test("idempotency() over HTTP completes the record when the client disconnects mid-body", async () => {
  const cancelled = deferred<unknown>();
  let runs = 0;
  await using server = serve(() => {
    runs++;
    let sent = 0;
    return new Response(
      new ReadableStream<Uint8Array<ArrayBuffer>>({
        async pull(controller) {
          await new Promise((r) => setTimeout(r, 2));
          controller.enqueue(pattern(16 * 1024, sent++));
        },
        cancel(reason) {
          cancelled.resolve(reason);
        },
      }, { highWaterMark: 0 }),
    );
  }, { maxResponseBytes: 32 * 1024 });
  const controller = new AbortController();
  const live = await fetch(`${server.url}/payments`, {
    method: "POST",
    headers: { "idempotency-key": "leaver" },
    body: "{}",
    signal: controller.signal,
  });
  const reader = live.body!.getReader();
  await reader.read();
  controller.abort();
  await reader.cancel().catch(() => {});
  await cancelled.promise;
  const replay = await send(server.url, "leaver");
  assert.equal(replay.status, 200);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  await replay.body?.cancel();
  assert.equal(runs, 1, "the handler is never re-run after its 2xx");
});

Deno.test("idempotency() over HTTP runs the handler once for 20 concurrent duplicates", async () => {
  let runs = 0;
  // A duplicate that arrives while the first runs gets 409, one that arrives
  // after it completed gets the replay: both count, whatever the timing.
  await using server = serve(async (req) => {
    runs++;
    return Response.json({ charged: (await req.json()).amount }, {
      status: 201,
    });
  });
  const answers = await Promise.all(
    Array.from({ length: 20 }, () => send(server.url, "dup", '{"amount":5}')),
  );
  const kinds = answers.map((r) =>
    r.status === 201
      ? r.headers.get("idempotent-replayed") === "true" ? "replay" : "live"
      : String(r.status)
  );
  const bodies = await Promise.all(answers.map((r) => r.text()));
  assert.equal(runs, 1);
  assert.equal(kinds.filter((k) => k === "live").length, 1, kinds.join());
  assert.ok(
    kinds.every((k) => k === "live" || k === "replay" || k === "409"),
    kinds.join(),
  );
  const winner = bodies[kinds.indexOf("live")];
  for (const [i, kind] of kinds.entries()) {
    if (kind === "replay") assert.equal(bodies[i], winner);
  }
  const later = await send(server.url, "dup", '{"amount":5}');
  assert.equal(await later.text(), winner);
});
