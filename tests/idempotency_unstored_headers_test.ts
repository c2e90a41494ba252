// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The `unstoredHeaders` option: per-response headers left out of records
 * and replays, kept on the live response (issue 9, risky defaults).
 *
 * @module
 */
import assert from "node:assert/strict";
import { idempotency, MemoryStore, slotOf } from "../mod.ts";
import type { ClaimOptions, StoredResponse } from "../src/store.ts";
import { fetchPost, post, serveLocal } from "./_support/http.ts";
import { pattern } from "./_support/bytes.ts";

const OLD_DATE = "Mon, 01 Jan 2001 00:00:00 GMT";
const claimOptions: ClaimOptions = {
  fingerprint: "f",
  leaseMs: 30_000,
  ttlMs: 60_000,
};

/** A handler whose response carries per-response headers. */
function app(body: Uint8Array<ArrayBuffer> | string = "paid") {
  const state = { runs: 0 };
  const handler = () => {
    state.runs++;
    return new Response(body, {
      status: 201,
      headers: [
        ["content-type", "text/plain"],
        ["date", OLD_DATE],
        ["set-cookie", "session=s1; HttpOnly"],
        ["set-cookie", "theme=dark"],
        ["x-request-id", `req-${state.runs}`],
        ["access-control-allow-origin", "https://a.example"],
      ],
    });
  };
  return { state, handler };
}

/** The record a MemoryStore holds for `key`, read back through a claim. */
async function recordOf(
  store: MemoryStore,
  key: string,
): Promise<StoredResponse> {
  const seen = await store.claim(slotOf("", key), claimOptions);
  assert.equal(seen.state, "completed");
  return (seen as { response: StoredResponse }).response;
}

function names(headers: Iterable<[string, string]>): string[] {
  return [...headers].map(([name]) => name);
}

Deno.test("storeSetCookie: true keeps Set-Cookie, Date left out by default; the live response keeps both", async () => {
  const store = new MemoryStore();
  const { state, handler } = app();
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    storeSetCookie: true,
  });
  const live = await guarded(post("k"));
  assert.equal(live.headers.get("date"), OLD_DATE);
  assert.deepEqual(live.headers.getSetCookie(), [
    "session=s1; HttpOnly",
    "theme=dark",
  ]);
  assert.equal(await live.text(), "paid");
  const record = await recordOf(store, "k");
  assert.deepEqual(names(record.headers), [
    "access-control-allow-origin",
    "content-type",
    "set-cookie",
    "set-cookie",
    "x-request-id",
  ]);
  const replay = await guarded(post("k"));
  assert.equal(replay.headers.get("date"), null);
  assert.deepEqual(replay.headers.getSetCookie(), [
    "session=s1; HttpOnly",
    "theme=dark",
  ]);
  assert.equal(replay.headers.get("x-request-id"), "req-1");
  assert.equal(state.runs, 1);
});

for (
  const [label, body] of [
    ["a captured body", "paid"],
    ["a body over maxResponseBytes", pattern(5000)],
  ] as const
) {
  Deno.test(`unstoredHeaders leaves headers out of the record and the replay, not the live response (${label})`, async () => {
    const store = new MemoryStore();
    const { state, handler } = app(body);
    const guarded = idempotency(handler, {
      scope: "global",
      store,
      unstoredHeaders: ["Set-Cookie", "X-Request-Id", "date"],
      maxResponseBytes: 1000,
    });
    const live = await guarded(post("k"));
    assert.equal(live.headers.get("x-request-id"), "req-1");
    assert.equal(live.headers.getSetCookie().length, 2);
    assert.equal(live.headers.get("date"), OLD_DATE);
    assert.equal(
      (await live.bytes()).byteLength,
      typeof body === "string" ? 4 : 5000,
    );
    const record = await recordOf(store, "k");
    assert.deepEqual(names(record.headers), [
      "access-control-allow-origin",
      "content-type",
      "idempotent-omitted-headers",
    ]);
    const replay = await guarded(post("k"));
    assert.equal(replay.status, 201);
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.equal(replay.headers.get("x-request-id"), null);
    assert.deepEqual(replay.headers.getSetCookie(), []);
    assert.equal(
      replay.headers.get("idempotent-omitted-headers"),
      "set-cookie, x-request-id",
    );
    assert.equal(
      replay.headers.get("access-control-allow-origin"),
      "https://a.example",
    );
    await replay.body?.cancel();
    assert.equal(state.runs, 1);
  });
}

Deno.test("a replay leaves out unstoredHeaders that an older record still holds", async () => {
  const store = new MemoryStore();
  const { state, handler } = app();
  // Written by an instance configured to store everything.
  await (await idempotency(handler, {
    scope: "global",
    store,
    unstoredHeaders: [],
    storeSetCookie: true,
  })(post("k")))
    .text();
  assert.ok(names((await recordOf(store, "k")).headers).includes("date"));
  const strict = idempotency(handler, {
    scope: "global",
    store,
    unstoredHeaders: ["date", "set-cookie"],
  });
  const replay = await strict(post("k"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.headers.get("date"), null);
  assert.deepEqual(replay.headers.getSetCookie(), []);
  assert.equal(replay.headers.get("idempotent-omitted-headers"), "set-cookie");
  assert.equal(replay.headers.get("x-request-id"), "req-1");
  assert.equal(state.runs, 1);
});

Deno.test('unstoredHeaders: ["x-request-id"] leaves out Set-Cookie too, not Date; the live response keeps all', async () => {
  const store = new MemoryStore();
  const { state, handler } = app();
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    unstoredHeaders: ["x-request-id"],
  });
  const live = await guarded(post("k"));
  assert.equal(live.headers.get("x-request-id"), "req-1");
  assert.equal(live.headers.getSetCookie().length, 2);
  assert.equal(await live.text(), "paid");
  const record = await recordOf(store, "k");
  assert.deepEqual(names(record.headers), [
    "access-control-allow-origin",
    "content-type",
    "date",
    "idempotent-omitted-headers",
  ]);
  const replay = await guarded(post("k"));
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(replay.headers.getSetCookie(), []);
  assert.equal(replay.headers.get("x-request-id"), null);
  assert.equal(replay.headers.get("date"), OLD_DATE);
  assert.equal(
    replay.headers.get("idempotent-omitted-headers"),
    "set-cookie, x-request-id",
  );
  await replay.body?.cancel();
  assert.equal(state.runs, 1);
});

Deno.test("unstoredHeaders: [] stores Date too", async () => {
  const store = new MemoryStore();
  const { handler } = app();
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    unstoredHeaders: [],
  });
  await (await guarded(post("k"))).text();
  const replay = await guarded(post("k"));
  assert.equal(replay.headers.get("date"), OLD_DATE);
});

Deno.test("over Deno.serve a replay gets the runtime's Date, not the first response's", async () => {
  const { state, handler } = app();
  const server = serveLocal(
    idempotency(handler, { scope: "global", store: new MemoryStore() }),
  );
  try {
    const url = `${server.url}/payments`;
    const send = () => fetchPost(url, "wire");
    const first = await send();
    assert.equal(first.headers.get("date"), OLD_DATE);
    await first.body?.cancel();
    const replay = await send();
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    const date = replay.headers.get("date");
    assert.ok(date !== null && date !== OLD_DATE, `date: ${date}`);
    await replay.body?.cancel();
    assert.equal(state.runs, 1);
  } finally {
    await server.shutdown();
  }
});

Deno.test("unstoredHeaders is validated eagerly", () => {
  const handler = () => new Response("x");
  for (
    const bad of [
      "set-cookie",
      ["set cookie"],
      [""],
      [42],
    ] as unknown[]
  ) {
    assert.throws(
      () =>
        idempotency(handler, {
          scope: "global",
          unstoredHeaders: bad as string[],
        }),
      (error: Error) =>
        error instanceof TypeError && error.message.includes("unstoredHeaders"),
      JSON.stringify(bad),
    );
  }
});

Deno.test("storeSetCookie is validated eagerly", () => {
  for (const bad of ["true", 1] as unknown[]) {
    assert.throws(
      () =>
        idempotency(() => new Response("x"), {
          scope: "global",
          storeSetCookie: bad as boolean,
        }),
      (error: Error) =>
        error instanceof TypeError && error.message.includes("storeSetCookie"),
      JSON.stringify(bad),
    );
  }
});
