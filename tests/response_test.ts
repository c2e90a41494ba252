// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Edges of what a retry is told, through the middleware: the headers of a
 * replay whose body was not recorded, the rounding of `Retry-After` on an
 * injected clock, and a `cacheable` predicate that throws. Each test here kills a mutant that survived the rest of the
 * suite (issue 16).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BODY_OMITTED_HEADER,
  HEADERS_OMITTED_HEADER,
  idempotency,
} from "../mod.ts";
import { bytesOf, frames, pattern, sameBytes } from "./_support/bytes.ts";
import { post } from "./_support/http.ts";
import { UnreadableStore } from "./_support/stores.ts";

Deno.test("idempotency() replays an omitted body without its Content-Encoding or Content-Length", async () => {
  const body = pattern(100, 16);
  let runs = 0;
  const guarded = idempotency(() => {
    runs++;
    return new Response(body, {
      status: 200,
      headers: {
        "content-type": "application/json",
        "content-encoding": "gzip",
        "content-length": "100",
      },
    });
  }, { scope: "global", maxResponseBytes: 10 });

  const live = await guarded(post("gz"));
  assert.equal(live.headers.get("content-encoding"), "gzip");
  assert.ok(sameBytes(await bytesOf(live), body), "the live body is intact");

  const replay = await guarded(post("gz"));
  assert.equal(runs, 1);
  assert.equal(replay.status, 200);
  assert.equal(replay.headers.get(BODY_OMITTED_HEADER), "too_large");
  assert.equal(replay.headers.get("content-type"), "application/json");
  assert.equal(
    replay.headers.get("content-encoding"),
    null,
    "an empty body is not gzip",
  );
  assert.equal(
    replay.headers.get("content-length"),
    null,
    "an empty body is not 100 bytes",
  );
  assert.equal((await bytesOf(replay)).byteLength, 0);
});

Deno.test("idempotency() rounds Retry-After up to whole seconds; an unreadable record has none, whatever the store's hint", async () => {
  const store = new UnreadableStore({
    unreadable: false,
    held: true,
    retryAfterMs: 0,
  });
  const guarded = idempotency(() => new Response("done", { status: 201 }), {
    scope: "global",
    store,
  });
  for (const [ms, seconds] of [[1, "1"], [999, "1"], [1_000, "1"]] as const) {
    store.retryAfterMs = ms;
    const held = await guarded(post("slow"));
    assert.equal(held.status, 409, `${ms} ms`);
    await held.body?.cancel();
    assert.equal(held.headers.get("retry-after"), seconds, `${ms} ms`);
  }
  store.unreadable = true;
  for (const ms of [1, 1_500, 30_000]) {
    store.retryAfterMs = ms;
    const unreadable = await guarded(post("slow"));
    assert.equal(unreadable.status, 500, `${ms} ms`);
    await unreadable.body?.cancel();
    assert.equal(unreadable.headers.get("retry-after"), null, `${ms} ms`);
  }
});

Deno.test("idempotency() records a 2xx when cacheable() throws, and a retry replays it", async () => {
  let runs = 0;
  const guarded = idempotency(() => {
    runs++;
    return new Response(`run ${runs}`, { status: 201 });
  }, {
    scope: "global",
    cacheable: () => {
      throw new Error("the predicate broke");
    },
  });
  const first = await guarded(post("predicate"));
  assert.equal(first.status, 201);
  assert.equal(await first.text(), "run 1");
  const retry = await guarded(post("predicate"));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(await retry.text(), "run 1");
  assert.equal(runs, 1, "a 2xx was seen: the handler must not run again");
});

Deno.test("idempotency() hands on small bodies byte for byte, typed or not, ASCII or not, live, replayed and to the handler", async () => {
  const ascii = new TextEncoder().encode('{"id":"pay_1","note":"plain"}');
  const wide = new TextEncoder().encode('{"note":"café €"}');
  const binary = pattern(300, 7);
  const cases: [string, Uint8Array<ArrayBuffer>, Record<string, string>][] = [
    ["ascii-typed", ascii, { "content-type": "application/json" }],
    ["ascii-untyped", ascii, {}],
    ["wide-typed", wide, { "content-type": "application/json" }],
    ["binary-typed", binary, { "content-type": "application/octet-stream" }],
    ["binary-untyped", binary, {}],
  ];
  for (const [key, body, headers] of cases) {
    const seen: { bytes: Uint8Array; type: string | null }[] = [];
    const guarded = idempotency(async (req) => {
      seen.push({
        bytes: new Uint8Array(await req.arrayBuffer()),
        type: req.headers.get("content-type"),
      });
      return new Response(body, { status: 201, headers });
    }, { scope: "global" });
    const live = await guarded(post(key, body, { headers }));
    const replay = await guarded(post(key, body, { headers }));
    assert.equal(seen.length, 1, key);
    assert.ok(sameBytes(seen[0]!.bytes, body), `${key}: the handler's bytes`);
    assert.equal(seen[0]!.type, headers["content-type"] ?? null, key);
    for (const res of [live, replay]) {
      assert.equal(
        res.headers.get("content-type"),
        headers["content-type"] ?? null,
        key,
      );
      assert.ok(sameBytes(await bytesOf(res), body), `${key}: the bytes`);
    }
  }
});

Deno.test("idempotency() records a response body of maxResponseBytes − 1 and maxResponseBytes whole, and omits one byte more as too_large", async () => {
  for (
    const [cap, size] of [[64, 63], [64, 64], [64, 65], [0, 0], [0, 1]] as const
  ) {
    const body = pattern(size, 5);
    const split = [body.subarray(0, size >> 1), body.subarray(size >> 1)];
    let runs = 0;
    const guarded = idempotency(() => {
      runs++;
      return new Response(frames(split), { status: 201 });
    }, { scope: "global", maxResponseBytes: cap });
    const live = await guarded(post("sized"));
    const what = `${size} bytes, cap ${cap}`;
    assert.ok(sameBytes(await bytesOf(live), body), `${what}: the live body`);
    const replay = await guarded(post("sized"));
    assert.equal(runs, 1, what);
    assert.equal(replay.status, 201, what);
    const whole = size <= cap;
    assert.equal(
      replay.headers.get(BODY_OMITTED_HEADER),
      whole ? null : "too_large",
      what,
    );
    const replayed = await bytesOf(replay);
    assert.ok(sameBytes(replayed, whole ? body : new Uint8Array()), what);
  }
});

Deno.test("idempotency() by default records a response body of 1 MiB whole and omits one byte more", async () => {
  for (const size of [1_048_576, 1_048_577]) {
    const body = pattern(size, 9);
    let runs = 0;
    const guarded = idempotency(() => {
      runs++;
      return new Response(
        frames([body.subarray(0, 1000), body.subarray(1000)]),
      );
    }, { scope: "global" });
    const live = await guarded(post("mib"));
    assert.ok(sameBytes(await bytesOf(live), body), `${size}: the live body`);
    const replay = await guarded(post("mib"));
    assert.equal(runs, 1);
    const whole = size === 1_048_576;
    assert.equal(
      replay.headers.get(BODY_OMITTED_HEADER),
      whole ? null : "too_large",
      `${size} bytes`,
    );
    assert.equal((await bytesOf(replay)).byteLength, whole ? size : 0);
  }
});

Deno.test("idempotency() records a body its handler's stream aborted as cancelled, and one that broke otherwise as stream_error", async () => {
  for (
    const [key, error, reason] of [
      ["aborted", new DOMException("client left", "AbortError"), "cancelled"],
      ["broken", new TypeError("db went away"), "stream_error"],
    ] as const
  ) {
    const guarded = idempotency(
      () =>
        new Response(frames([pattern(4)], { errorAfter: 1, error }), {
          status: 201,
        }),
      { scope: "global", maxResponseBytes: 64 },
    );
    const live = await guarded(post(key));
    await assert.rejects(() => bytesOf(live));
    const replay = await guarded(post(key));
    assert.equal(replay.status, 201, key);
    assert.equal(replay.headers.get(BODY_OMITTED_HEADER), reason, key);
  }
});

Deno.test("idempotency() replays a 205 without a body, as it was sent", async () => {
  let runs = 0;
  const guarded = idempotency(() => {
    runs++;
    return new Response(null, { status: 205 });
  }, { scope: "global" });
  assert.equal((await guarded(post("reset"))).status, 205);
  const replay = await guarded(post("reset"));
  assert.equal(runs, 1);
  assert.equal(replay.status, 205);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.body, null);
});

Deno.test("idempotency() passes a client's cancel of an overflowing live body on to the handler's stream, mid-read too", async () => {
  for (const readFirst of [false, true]) {
    const reasons: unknown[] = [];
    const guarded = idempotency(
      () =>
        new Response(
          frames([pattern(8), pattern(8), pattern(8)], {
            onCancel: (reason) => reasons.push(reason),
          }),
        ),
      { scope: "global", maxResponseBytes: 4 },
    );
    const live = await guarded(post(`cancel-${readFirst}`));
    const reader = live.body!.getReader();
    if (readFirst) {
      await reader.read(); // the prefix
      await reader.read(); // the rest of the frame that crossed the cap
    }
    await reader.cancel("client left");
    assert.deepEqual(reasons, ["client left"], `read first: ${readFirst}`);
  }
});

Deno.test("idempotency() leaves Date out of a replay without naming it, and names the other headers left out", async () => {
  for (
    const [key, extra, named] of [
      ["dated", {}, null],
      ["cookie", { "set-cookie": "id=1" }, "set-cookie"],
    ] as const
  ) {
    const guarded = idempotency(
      () =>
        new Response("ok", {
          headers: { date: "Tue, 01 Dec 2026 12:00:00 GMT", ...extra },
        }),
      { scope: "global" },
    );
    await (await guarded(post(key))).text();
    const replay = await guarded(post(key));
    assert.equal(replay.headers.get("idempotent-replayed"), "true", key);
    assert.equal(replay.headers.get("date"), null, key);
    assert.equal(replay.headers.get(HEADERS_OMITTED_HEADER), named, key);
  }
});
