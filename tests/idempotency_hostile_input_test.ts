// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Input an attacker or a broken client controls: the method's case, a
 * request body that breaks mid-read or lies about its length, scopes that
 * differ only in ill-formed UTF-16. Each answer is a replay or a 4xx, never
 * an exception, never a second run, and nothing is claimed for bad input.
 *
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  idempotency,
  type IdempotencyOptions,
  MemoryStore,
  parseIdempotencyKey,
  PROBLEM_TYPES,
  slotOf,
} from "../mod.ts";
import { deferred } from "./_support/time.ts";
import { frames } from "./_support/bytes.ts";
import { type LocalServer, post, serveLocal } from "./_support/http.ts";
import { recorder } from "./_support/stores.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";

const encoder = new TextEncoder();

/** A handler that counts its runs and echoes the body's length. */
function counted() {
  const state = { runs: 0 };
  const handler = async (req: Request) => {
    state.runs++;
    const body = await req.bytes();
    return Response.json({ run: state.runs, bytes: body.byteLength }, {
      status: 201,
    });
  };
  return { state, handler };
}

/** A Deno.serve on port 0 whose `onError` counts what escaped the handler. */
function serve(
  handler: (req: Request) => Response | Promise<Response>,
  options: IdempotencyOptions,
): LocalServer {
  return serveLocal(idempotency(handler, options));
}

// --- the method's case (issue 9, defect 4) -----------------------------------

Deno.test("a lowercase or mixed-case guarded method is guarded, in process", async () => {
  const { state, handler } = counted();
  const guarded = idempotency(handler, {
    scope: "global",
    store: new MemoryStore(),
  });
  for (const method of ["patch", "Patch", "pAtCh"]) {
    const key = `case-${method}`;
    const first = await guarded(post(key, "{}", { method }));
    assert.equal(first.status, 201);
    assert.equal(first.headers.get("idempotent-replayed"), null);
    const retry = await guarded(post(key, "{}", { method }));
    assert.equal(retry.status, 201, method);
    assert.equal(retry.headers.get("idempotent-replayed"), "true", method);
  }
  assert.equal(state.runs, 3);
});

Deno.test("'patch' and 'PATCH' with one key are one request, not a reused key", async () => {
  const { state, handler } = counted();
  const guarded = idempotency(handler, {
    scope: "global",
    store: new MemoryStore(),
  });
  assert.equal(
    (await guarded(post("k", "{}", { method: "patch" }))).status,
    201,
  );
  const retry = await guarded(post("k", "{}", { method: "PATCH" }));
  assert.equal(retry.status, 201);
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(state.runs, 1);
});

Deno.test("a 'methods' option in lower case guards the upper-case method", async () => {
  const { state, handler } = counted();
  const guarded = idempotency(handler, {
    scope: "global",
    store: new MemoryStore(),
    methods: ["purge", "post"],
  });
  await guarded(post("p", "{}", { method: "PURGE" }));
  const retry = await guarded(post("p", "{}", { method: "purge" }));
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(state.runs, 1);
  // PATCH is not in this list, in any case: a bare call-through.
  await guarded(post("q", "{}", { method: "patch" }));
  await guarded(post("q", "{}", { method: "patch" }));
  assert.equal(state.runs, 3);
});

Deno.test("fetch(url, { method: 'patch' }) through Deno.serve runs the handler once", async () => {
  const { state, handler } = counted();
  const seen: string[] = [];
  await using server = serve((req) => {
    seen.push(req.method);
    return handler(req);
  }, { scope: "global", store: new MemoryStore() });
  const send = () =>
    fetch(`${server.url}/orders/1`, {
      method: "patch",
      headers: { "idempotency-key": "wire-patch" },
      body: '{"qty":2}',
    });
  const first = await send();
  assert.equal(first.status, 201);
  await first.body?.cancel();
  const retry = await send();
  assert.equal(retry.status, 201);
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  await retry.body?.cancel();
  // The method reached the server as sent: this is the case that bypassed.
  assert.deepEqual(seen, ["patch"]);
  assert.equal(state.runs, 1);
  assert.deepEqual(server.escaped, []);
});

// --- a request body that breaks or lies (issue 9, defect 6) ------------------

Deno.test("a request body stream that errors mid-read is a 400 problem, with nothing claimed", async () => {
  const { state, handler } = counted();
  const store = new FaultyStore(new MemoryStore());
  const events = recorder();
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    onEvent: events.onEvent,
  });
  const broken = new Request("http://api.test/payments", {
    method: "POST",
    headers: { "idempotency-key": "cut-off" },
    body: frames([encoder.encode('{"amount":'), encoder.encode("10")], {
      errorAfter: 2,
      error: new Error("connection reset"),
    }),
    // @ts-ignore: `duplex` is required for a stream body, missing from the lib types
    duplex: "half",
  });
  const res = await guarded(broken);
  assert.equal(res.status, 400);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  const problem = await res.json();
  assert.equal(problem.type, PROBLEM_TYPES.incomplete);
  assert.equal(problem.status, 400);
  assert.equal(problem.instance, "/payments");
  assert.equal(state.runs, 0);
  assert.deepEqual(store.calls, {
    claim: 0,
    complete: 0,
    release: 0,
    extend: 0,
  });
  const rejected = events.events.find((e) => e.type === "rejected");
  assert.ok(rejected && rejected.type === "rejected");
  assert.equal(rejected.reason, "incomplete");
  assert.equal(rejected.status, 400);
  // The key stays free: the same request, sent whole, runs.
  const whole = await guarded(post("cut-off", '{"amount":10}'));
  assert.equal(whole.status, 201);
  assert.equal(state.runs, 1);
});

Deno.test("a Content-Length that understates the stream never buffers past maxRequestBytes", async () => {
  const { state, handler } = counted();
  const store = new FaultyStore(new MemoryStore());
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    maxRequestBytes: 10_000,
  });
  let pulled = 0;
  const frame = new Uint8Array(1000);
  const huge = new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull(controller) {
      pulled++;
      if (pulled > 1000) controller.close(); // 1 MB in all
      else controller.enqueue(frame.slice());
    },
  }, { highWaterMark: 0 });
  const lying = new Request("http://api.test/payments", {
    method: "POST",
    headers: { "idempotency-key": "liar", "content-length": "5" },
    body: huge,
    // @ts-ignore: `duplex` is required for a stream body, missing from the lib types
    duplex: "half",
  });
  assert.equal(lying.headers.get("content-length"), "5");
  const res = await guarded(lying);
  assert.equal(res.status, 413);
  assert.equal((await res.json()).type, PROBLEM_TYPES.tooLarge);
  // 11 frames cross the bound; a reader that trusted the header read 1000.
  assert.ok(pulled <= 12, `pulled ${pulled} frames of 1000 bytes`);
  assert.equal(state.runs, 0);
  assert.equal(store.calls.claim, 0);
});

Deno.test("a Content-Length that understates a small body reads the whole body", async () => {
  const { handler } = counted();
  const guarded = idempotency(handler, {
    scope: "global",
    store: new MemoryStore(),
  });
  const res = await guarded(
    new Request("http://api.test/payments", {
      method: "POST",
      headers: { "idempotency-key": "short", "content-length": "2" },
      body: frames([encoder.encode("0123456789"), encoder.encode("abcdef")]),
      // @ts-ignore: `duplex` is required for a stream body, missing from the lib types
      duplex: "half",
    }),
  );
  assert.equal(res.status, 201);
  assert.equal((await res.json()).bytes, 16);
});

Deno.test("a request body read before the middleware is a TypeError (a programming error, not the client's)", async () => {
  const { state, handler } = counted();
  const guarded = idempotency(handler, {
    scope: "global",
    store: new MemoryStore(),
  });
  const req = post("used", '{"a":1}');
  await req.text();
  await assert.rejects(async () => await guarded(req), TypeError);
  assert.equal(state.runs, 0);
});

/**
 * Writes raw HTTP to a Deno.serve: the head and the first part, then (once
 * the handler has the request) the rest; then closes or half-closes, waits
 * for the middleware to settle, and reads what came back.
 */
async function rawExchange(
  port: number,
  head: string,
  before: string,
  after: string,
  end: "close" | "half-close",
  dispatched: Promise<void>,
  settled: Promise<void>,
): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(encoder.encode(head + before));
    await dispatched;
    if (after !== "") await conn.write(encoder.encode(after));
    if (end === "close") {
      conn.close();
      await settled;
      return "";
    }
    await conn.closeWrite();
    await settled;
    let text = "";
    const decoder = new TextDecoder();
    const buffer = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buffer).catch(() => null);
      if (n === null) break;
      text += decoder.decode(buffer.subarray(0, n), { stream: true });
    }
    conn.close();
    return text;
  } catch (error) {
    try {
      conn.close();
    } catch {
      // Already closed.
    }
    throw error;
  }
}

const CHUNKED =
  "POST /payments HTTP/1.1\r\nHost: a\r\nIdempotency-Key: raw\r\nTransfer-Encoding: chunked\r\n\r\n";
for (
  const [label, head, before, after, end] of [
    [
      "a chunked body followed by garbage framing",
      CHUNKED,
      "5\r\nhello\r\n",
      "zz-not-hex\r\nxxxxx\r\n0\r\n\r\n",
      "half-close",
    ],
    [
      "a chunked body cut off by the client",
      CHUNKED,
      "5\r\nhello\r\n",
      "10\r\nonly-part",
      "half-close",
    ],
    [
      "a Content-Length body the client stops sending",
      "POST /payments HTTP/1.1\r\nHost: a\r\nIdempotency-Key: raw\r\nContent-Length: 100\r\n\r\n",
      '{"amount":',
      "",
      "half-close",
    ],
    [
      "a chunked upload whose socket closes mid-body",
      CHUNKED,
      "5\r\nhello\r\n",
      "",
      "close",
    ],
  ] as const
) {
  Deno.test(`raw HTTP: ${label} is a 400 problem, never a 500, with nothing claimed`, async () => {
    const { state, handler } = counted();
    const store = new FaultyStore(new MemoryStore());
    const events = recorder();
    const dispatched = deferred();
    const settled = deferred();
    const guarded = idempotency(handler, {
      scope: "global",
      store,
      onEvent: events.onEvent,
    });
    const server = serveLocal(async (req) => {
      dispatched.resolve();
      try {
        return await guarded(req);
      } catch (error) {
        server.escaped.push(error);
        throw error;
      } finally {
        settled.resolve();
      }
    });
    try {
      const { escaped } = server;
      const text = await rawExchange(
        server.port,
        head,
        before,
        after,
        end,
        dispatched.promise,
        settled.promise,
      );
      assert.deepEqual(escaped, []);
      const event = events.events.find((e) => e.type === "rejected");
      assert.ok(event?.type === "rejected", JSON.stringify(events.types()));
      assert.equal(event.reason, "incomplete");
      if (text !== "") {
        // When the connection still carries an answer, it is the 400 problem.
        assert.match(text, /^HTTP\/1\.1 400 /);
        assert.ok(text.includes(PROBLEM_TYPES.incomplete), text);
      }
      assert.equal(state.runs, 0);
      assert.equal(store.calls.claim, 0);
      assert.deepEqual(escaped, []);
    } finally {
      await server.shutdown();
    }
  });
}

// --- ill-formed UTF-16 in scopes (issue 9, defect 7) -------------------------

Deno.test("slotOf keeps scopes apart that UTF-8 would merge", () => {
  const scopes = ["\uD800", "\uDBFF", "\uDC00", "\uFFFD", "a\uD800", "a\uFFFD"];
  const slots = new Set(scopes.map((s) => slotOf(s, "k")));
  assert.equal(slots.size, scopes.length);
  // A lone surrogate in the key (slotOf is public) is kept apart too.
  assert.notEqual(slotOf("", "\uD800"), slotOf("", "\uFFFD"));
});

Deno.test("slotOf is unchanged for well-formed text: records written before stay reachable", () => {
  // Values computed by the release before the UTF-16 fix.
  assert.equal(
    slotOf("tenant-a", "order-42"),
    "214e81d903d797436b367798223cca494abcad92ddd854bc671804280ac0f21f",
  );
  assert.equal(
    slotOf("", "1"),
    "b47b32e3473baa7d751477b576abcb99cb7354cf90109723d10bce326f59cbc6",
  );
  assert.equal(
    slotOf("ünï €😀", "k"),
    "56ad6ba3ee1a3744cb51c36bac240bbf21ba7f25d1b945723f6f56b088647c09",
  );
});

/** Strings biased towards what collides: surrogates, U+FFFD, separators, digits. */
const tricky = fc.string({
  unit: fc.oneof(
    fc.constantFrom(
      "\uD800",
      "\uDBFF",
      "\uDC00",
      "\uDFFF",
      "\uFFFD",
      "\n",
      ":",
      "0",
      "1",
      "a",
      "\u00e9",
      "\uD83D\uDE00",
    ),
    fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
  ),
  maxLength: 6,
});

Deno.test("property: distinct (scope, key) pairs have distinct slots, and a slot is stable", () => {
  fc.assert(
    fc.property(tricky, tricky, tricky, tricky, (s1, k1, s2, k2) => {
      const a = slotOf(s1, k1);
      assert.equal(slotOf(s1, k1), a);
      assert.match(a, /^[0-9a-f]{64}$/);
      const same = s1 === s2 && k1 === k2;
      assert.equal(
        a === slotOf(s2, k2),
        same,
        JSON.stringify([s1, k1, s2, k2]),
      );
    }),
    { numRuns: 20_000 },
  );
});

Deno.test("scopes that differ only in a lone surrogate run separately through the middleware", async () => {
  const { state, handler } = counted();
  const guarded = idempotency(handler, {
    store: new MemoryStore(),
    scope: (req) => req.headers.get("x-tenant") === "a" ? "\uD800" : "\uDBFF",
  });
  const first = await guarded(
    post("k", "{}", { headers: { "x-tenant": "a" } }),
  );
  const second = await guarded(
    post("k", "{}", { headers: { "x-tenant": "b" } }),
  );
  assert.equal(first.status, 201);
  assert.equal(second.status, 201);
  assert.equal(second.headers.get("idempotent-replayed"), null);
  assert.equal(state.runs, 2);
});

Deno.test("custom fingerprints that differ only in a lone surrogate are different requests (422)", async () => {
  const { state, handler } = counted();
  const guarded = idempotency(handler, {
    scope: "global",
    store: new MemoryStore(),
    fingerprint: (req) => req.headers.get("x-v") === "1" ? "\uD800" : "\uFFFD",
  });
  await guarded(post("fp", "{}", { headers: { "x-v": "1" } }));
  const other = await guarded(post("fp", "{}", { headers: { "x-v": "2" } }));
  assert.equal(other.status, 422);
  assert.equal(state.runs, 1);
});

Deno.test("keys cannot be ill-formed: a lone surrogate or non-ASCII key is malformed", () => {
  for (const value of ["\uD800", "a\uDC00b", '"\uD800"', "\uFFFD", "é"]) {
    assert.equal(parseIdempotencyKey(value).ok, false, JSON.stringify(value));
  }
});
