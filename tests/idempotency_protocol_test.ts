// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's protocol: keys, replays, 409/413/422/400/503 problem
 * answers, scopes, and what the handler is handed. Each answer told apart
 * from its neighbours (status, problem type, event) and the events' details
 * are in `idempotency_answers_test.ts`; `maxRequestBytes` at its boundaries
 * and bodies read or empty in `idempotency_body_limit_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency, PROBLEM_TYPES } from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { bytesOf, frames, pattern, sameBytes } from "./_support/bytes.ts";
import { deferred } from "./_support/time.ts";
import { post } from "./_support/http.ts";
import { recorder } from "./_support/stores.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";
import { counting } from "./_support/idempotency.ts";

Deno.test("idempotency() answers 422 when a key is reused with another body, path or query", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const log = recorder();
  const guarded = idempotency(handler, {
    scope: "global",
    onEvent: log.onEvent,
  });
  await (await guarded(post("k", '{"amount":1}'))).text();
  for (
    const other of [
      post("k", '{"amount":2}'),
      post("k", '{"amount":1}', { path: "/refunds" }),
      post("k", '{"amount":1}', { path: "/payments?x=1" }),
      post("k", '{"amount":1}', { method: "PATCH" }),
    ]
  ) {
    const res = await guarded(other);
    assert.equal(res.status, 422);
    assert.equal(res.headers.get("content-type"), "application/problem+json");
    const problem = await res.json();
    assert.equal(problem.type, PROBLEM_TYPES.reused);
    assert.equal(problem.status, 422);
    assert.equal(typeof problem.title, "string");
    assert.equal(typeof problem.detail, "string");
    assert.equal(typeof problem.instance, "string");
  }
  assert.equal(state.runs, 1);
  assert.equal(log.types().filter((t) => t === "mismatch").length, 4);
});

Deno.test("idempotency() answers 409 with Retry-After to a loser while the winner streams", async () => {
  const gate = deferred();
  const started = deferred();
  const body = pattern(300, 10);
  const { state, handler } = counting(() => {
    started.resolve();
    return new Response(frames([body], { gate: gate.promise }));
  });
  const guarded = idempotency(handler, { scope: "global", lease: 10_000 });
  const winner = guarded(post("race"));
  await started.promise;
  const loser = await guarded(post("race"));
  assert.equal(loser.status, 409);
  // Nothing settled yet: 1 s, not the 10 s lease.
  assert.equal(loser.headers.get("retry-after"), "1");
  assert.equal((await loser.json()).type, PROBLEM_TYPES.inFlight);
  gate.resolve();
  assert.ok(sameBytes(await bytesOf(await winner), body));
  const after = await guarded(post("race"));
  assert.ok(sameBytes(await bytesOf(after), body));
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() replays status and headers in order", async () => {
  const guarded = idempotency(() =>
    new Response("created", {
      status: 201,
      statusText: "Created",
      headers: [["location", "/payments/7"], ["x-b", "2"], ["x-a", "1"], [
        "content-type",
        "text/plain",
      ]],
    }), { scope: "global" });
  const first = await guarded(post("hdr"));
  const firstHeaders = [...first.headers];
  await first.text();
  const replay = await guarded(post("hdr"));
  assert.equal(replay.status, 201);
  assert.equal(await replay.text(), "created");
  const replayed = [...replay.headers].filter(([name]) =>
    name !== "idempotent-replayed"
  );
  assert.deepEqual(replayed, firstHeaders);
});

Deno.test("idempotency() replays every Set-Cookie separately", async () => {
  const guarded = idempotency(() => {
    const headers = new Headers();
    for (let i = 0; i < 5; i++) {
      headers.append(
        "set-cookie",
        `c${i}=${i}; Path=/; Expires=Wed, 21 Oct 2026 07:28:00 GMT`,
      );
    }
    return new Response("ok", { headers });
  }, { scope: "global", storeSetCookie: true });
  const first = await guarded(post("cookies"));
  await first.text();
  const replay = await guarded(post("cookies"));
  assert.deepEqual(replay.headers.getSetCookie(), first.headers.getSetCookie());
  assert.equal(replay.headers.getSetCookie().length, 5);
});

Deno.test("idempotency() treats a quoted and a bare key as one key", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const guarded = idempotency(handler, { scope: "global" });
  await (await guarded(post('"abc"'))).text();
  const replay = await guarded(post("abc"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() answers 400 to a malformed key and never calls the store", async () => {
  const store = new FaultyStore(new MemoryStore());
  const { state, handler } = counting(() => new Response("ok"));
  const guarded = idempotency(handler, { scope: "global", store });
  for (
    const bad of [
      '"unterminated',
      '"a"; p=1',
      "x".repeat(256),
      '""',
      "caf\u00e9",
      "a b",
      '"tab\there"',
    ]
  ) {
    const res = await guarded(post(bad));
    assert.equal(res.status, 400, `key ${JSON.stringify(bad)}`);
    const problem = await res.json();
    assert.equal(problem.type, PROBLEM_TYPES.malformed);
    assert.equal(problem.instance, "/payments");
  }
  assert.equal(store.calls.claim, 0);
  assert.equal(state.runs, 0);
  const ok = await guarded(post("x".repeat(255)));
  assert.equal(ok.status, 200);
});

Deno.test("idempotency() passes a request without a key through untouched, unless keys are required", async () => {
  const store = new FaultyStore(new MemoryStore());
  let seen: Request | undefined;
  const handler = (req: Request) => {
    seen = req;
    return new Response("ok");
  };
  const optional = idempotency(handler, { scope: "global", store });
  const request = post(null);
  await (await optional(request)).text();
  assert.equal(seen, request, "the very request object reaches the handler");
  assert.equal(request.bodyUsed, false, "its body was not read");
  const get = new Request("http://api.test/payments", {
    headers: { "idempotency-key": "k" },
  });
  await (await optional(get)).text();
  assert.equal(seen, get, "an unguarded method passes through with its key");
  assert.equal(store.calls.claim, 0);

  const required = idempotency(handler, {
    scope: "global",
    store,
    required: true,
  });
  const res = await required(post(null));
  assert.equal(res.status, 400);
  assert.equal((await res.json()).type, PROBLEM_TYPES.missing);
});

Deno.test("idempotency() answers 413 to a body over maxRequestBytes, declared or streamed", async () => {
  const { state, handler } = counting(() => new Response("ok"));
  const store = new FaultyStore(new MemoryStore());
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    maxRequestBytes: 100,
  });
  const declared = await guarded(post("big", pattern(101)));
  assert.equal(declared.status, 413);
  assert.equal((await declared.json()).type, PROBLEM_TYPES.tooLarge);
  const streamed = new Request("http://api.test/payments", {
    method: "POST",
    headers: { "idempotency-key": "big2" },
    body: frames([pattern(60), pattern(60)]),
  });
  assert.equal((await guarded(streamed)).status, 413);
  const fits = await guarded(post("ok", pattern(100)));
  assert.equal(fits.status, 200);
  assert.equal(store.calls.claim, 1);
  assert.equal(state.runs, 1);
});

Deno.test("idempotency() hands the handler the same bytes, headers, method and URL", async () => {
  const body = pattern(5000, 12);
  let got: {
    bytes: Uint8Array;
    type: string | null;
    method: string;
    url: string;
  } | undefined;
  const guarded = idempotency(async (req) => {
    got = {
      bytes: new Uint8Array(await req.arrayBuffer()),
      type: req.headers.get("content-type"),
      method: req.method,
      url: req.url,
    };
    return new Response("ok");
  }, { scope: "global" });
  const streamed = new Request("http://api.test/payments?x=1", {
    method: "PATCH",
    headers: {
      "idempotency-key": "same",
      "content-type": "application/octet-stream",
    },
    body: frames([body.subarray(0, 7), body.subarray(7)]),
  });
  await (await guarded(streamed)).text();
  assert.ok(got && sameBytes(got.bytes, body));
  assert.equal(got.type, "application/octet-stream");
  assert.equal(got.method, "PATCH");
  assert.equal(got.url, "http://api.test/payments?x=1");
});

Deno.test("idempotency() gives the handler the original request's signal", async () => {
  const controller = new AbortController();
  let signal: AbortSignal | undefined;
  const guarded = idempotency((req) => {
    signal = req.signal;
    return new Response("ok");
  }, { scope: "global" });
  const request = new Request("http://api.test/payments", {
    method: "POST",
    headers: { "idempotency-key": "sig" },
    body: "{}",
    signal: controller.signal,
  });
  await (await guarded(request)).text();
  controller.abort();
  assert.equal(signal?.aborted, true);
});

Deno.test("idempotency() gives the handler the request's headers, repeated ones and redirect mode included", async () => {
  const seen: Request[] = [];
  const guarded = idempotency(async (req) => {
    seen.push(req);
    await req.arrayBuffer();
    return new Response("ok");
  }, { scope: "global" });
  const headers = new Headers([
    ["idempotency-key", "hdr-1"],
    ["x-b", "2"],
    ["x-a", "1"],
    ["x-a", "3"],
    ["__proto__", "p"],
  ]);
  const plain = (key: string, extra: [string, string][] = []) =>
    new Request("http://api.test/payments", {
      method: "POST",
      headers: [...headers, ...extra].map(([name, value]) =>
        name === "idempotency-key" ? [name, key] : [name, value]
      ),
      body: "{}",
      redirect: "manual",
    });
  const first = plain("hdr-1");
  await (await guarded(first)).text();
  const cookies = plain("hdr-2", [["set-cookie", "a=1"], [
    "set-cookie",
    "b=2",
  ]]);
  await (await guarded(cookies)).text();
  assert.deepEqual([...seen[0]!.headers], [...first.headers]);
  assert.equal(seen[0]!.headers.get("__proto__"), "p");
  assert.equal(seen[0]!.redirect, "manual");
  assert.deepEqual(seen[1]!.headers.getSetCookie(), ["a=1", "b=2"]);
  assert.deepEqual([...seen[1]!.headers], [...cookies.headers]);
  assert.ok(seen[0] !== first && seen[0] instanceof Request);
});

Deno.test("idempotency() answers 503 with Retry-After when the store is down, and fails open when asked", async () => {
  const store = new FaultyStore(new MemoryStore());
  store.failing.add("claim");
  const log = recorder();
  const { state, handler } = counting(() => new Response("ran"));
  const closed = idempotency(handler, {
    scope: "global",
    store,
    onEvent: log.onEvent,
  });
  const res = await closed(post("down"));
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "1");
  assert.equal((await res.json()).type, PROBLEM_TYPES.unavailable);
  assert.equal(state.runs, 0);
  assert.ok(
    log.events.some((e) => e.type === "store_error" && e.operation === "claim"),
  );

  const open = idempotency(handler, {
    scope: "global",
    store,
    failOpen: true,
    onEvent: log.onEvent,
  });
  const ran = await open(post("down"));
  assert.equal(await ran.text(), "ran");
  assert.equal(state.runs, 1);
  assert.ok(log.events.some((e) => e.type === "fail_open"));
  assert.equal(
    store.calls.complete,
    0,
    "nothing is recorded for an unguarded run",
  );
});

Deno.test("idempotency() keeps scopes apart: two tenants with one key", async () => {
  const { state, handler } = counting((req) =>
    new Response(req.headers.get("x-tenant"))
  );
  const guarded = idempotency(handler, {
    scope: (req) => req.headers.get("x-tenant") ?? "anonymous",
  });
  const a = await guarded(post("1", "{}", { headers: { "x-tenant": "a" } }));
  const b = await guarded(post("1", "{}", { headers: { "x-tenant": "b" } }));
  assert.equal(await a.text(), "a");
  assert.equal(await b.text(), "b");
  const replayA = await guarded(
    post("1", "{}", { headers: { "x-tenant": "a" } }),
  );
  assert.equal(await replayA.text(), "a");
  assert.equal(state.runs, 2);
});

Deno.test("idempotency() releases the key when the handler throws, and rethrows", async () => {
  const log = recorder();
  const { state, handler } = counting((_req, n) => {
    if (n === 1) throw new Error("handler blew up");
    return new Response("second time");
  });
  const guarded = idempotency(handler, {
    scope: "global",
    onEvent: log.onEvent,
  });
  await assert.rejects(
    () => Promise.resolve(guarded(post("throw"))),
    /handler blew up/,
  );
  assert.ok(
    log.events.some((e) => e.type === "released" && e.reason === "thrown"),
  );
  assert.equal(await (await guarded(post("throw"))).text(), "second time");
  assert.equal(state.runs, 2);
});

Deno.test("idempotency() replays a 204 with no body, and a binary body byte for byte", async () => {
  const guarded = idempotency(
    (req) =>
      new URL(req.url).pathname === "/empty"
        ? new Response(null, { status: 204 })
        : new Response(pattern(70_000, 13), {
          headers: { "content-type": "application/octet-stream" },
        }),
    { scope: "global" },
  );
  assert.equal(
    (await guarded(post("e", "{}", { path: "/empty" }))).status,
    204,
  );
  const empty = await guarded(post("e", "{}", { path: "/empty" }));
  assert.equal(empty.status, 204);
  assert.equal(empty.body, null);
  assert.equal(empty.headers.get("idempotent-replayed"), "true");
  await (await guarded(post("bin", "{}", { path: "/bin" }))).arrayBuffer();
  const bin = await guarded(post("bin", "{}", { path: "/bin" }));
  assert.ok(sameBytes(await bytesOf(bin), pattern(70_000, 13)));
});

Deno.test("idempotency() releases the key and throws when the handler returns no Response", async () => {
  const store = new FaultyStore(new MemoryStore());
  let calls = 0;
  const guarded = idempotency(
    (() => {
      calls++;
      return calls === 1 ? undefined : new Response("second");
    }) as unknown as () => Response,
    { scope: "global", store },
  );
  await assert.rejects(
    () => Promise.resolve(guarded(post("nothing"))),
    /must return a Response/,
  );
  assert.equal(store.calls.release, 1);
  assert.equal(await (await guarded(post("nothing"))).text(), "second");
});
