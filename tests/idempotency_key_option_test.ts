// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The `key` option: a key read from the request (its body) instead of the
 * header. A body-keyed webhook replays over HTTP (`Deno.serve`) and through
 * Hono; the key is checked as a header's is (255 characters, n−1/n/n+1;
 * empty, control characters, commas: 400); `undefined` is no key (the
 * handler unguarded, or 400 with `required`); a throw or a value that is no
 * string is the `misconfigured` 500 before any claim, an `option_error`
 * event and a log line; a body over `maxRequestBytes` is 413 before the
 * function runs.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Hono } from "hono";
import {
  idempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
  LIFETIME_HEADER,
  MemoryStore,
  PROBLEM_TYPES,
} from "../mod.ts";
import { idempotent } from "../src/hono.ts";
import { post, serveLocal } from "./_support/http.ts";
import { counting } from "./_support/idempotency.ts";

const decoder = new TextDecoder();
/** The webhook's key: its event id, from the JSON body. */
const eventId = (_request: Request, body: Uint8Array) =>
  JSON.parse(decoder.decode(body)).id;

/** A guarded counting handler with `key`, its events and log lines. */
function keyed(
  key: NonNullable<IdempotencyOptions["key"]>,
  options: Partial<IdempotencyOptions> = {},
) {
  const events: IdempotencyEvent[] = [];
  const lines: string[] = [];
  const logger = {
    warn: (line: string) => lines.push(line),
    error: (line: string) => lines.push(line),
  };
  const { state, handler } = counting(async (req, n) =>
    new Response(`run ${n}: ${await req.text()}`, { status: 201 })
  );
  const store = new MemoryStore();
  const guarded = idempotency(handler, {
    scope: "global",
    store,
    key,
    logger,
    onEvent: (event) => events.push(event),
    ...options,
  });
  return { guarded, state, events, lines, store };
}

/** A POST without the header. */
const hook = (body: string, headers: Record<string, string> = {}) =>
  post(null, body, { path: "/hooks", headers });

Deno.test("key: a webhook keyed by its body's event id replays over HTTP; another id runs; the id with another body is 422", async () => {
  const { guarded, state } = keyed(eventId);
  await using server = serveLocal(guarded);
  const send = (body: string) =>
    fetch(`${server.url}/hooks`, { method: "POST", body });
  const delivery = '{"id":"evt_1","type":"charge.succeeded"}';
  const first = await send(delivery);
  assert.equal(first.status, 201);
  const firstBody = await first.text();
  assert.equal(firstBody, `run 1: ${delivery}`);
  const redelivered = await send(delivery);
  assert.equal(redelivered.headers.get("idempotent-replayed"), "true");
  assert.equal(await redelivered.text(), firstBody);
  const next = await send('{"id":"evt_2","type":"charge.succeeded"}');
  assert.equal(
    await next.text(),
    'run 2: {"id":"evt_2","type":"charge.succeeded"}',
  );
  const altered = await send('{"id":"evt_1","type":"charge.refunded"}');
  assert.equal(altered.status, 422);
  assert.equal((await altered.json()).type, PROBLEM_TYPES.reused);
  assert.equal(state.runs, 2);
  assert.deepEqual(server.escaped, []);
});

Deno.test("key: through Hono's idempotent(), a body-keyed delivery replays", async () => {
  let runs = 0;
  const app = new Hono();
  app.use("/hooks", idempotent({ scope: "global", key: eventId }));
  app.post("/hooks", async (c) => {
    const { id } = await c.req.json();
    return c.json({ id, run: ++runs }, 201);
  });
  const send = () =>
    app.request("/hooks", { method: "POST", body: '{"id":"evt_h"}' });
  const first = await send();
  const retry = await send();
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(await retry.json(), await first.json());
  assert.equal(runs, 1);
});

Deno.test("key: the function gets the request and the bytes read; the header is not read", async () => {
  const seen: [string, string][] = [];
  const { guarded, state } = keyed(async (request, body) => {
    await Promise.resolve();
    seen.push([request.url, decoder.decode(body)]);
    return "from-body";
  });
  const first = await guarded(hook("payload", { "idempotency-key": "h1" }));
  await first.text();
  // A header that would be malformed is not read either.
  const other = await guarded(hook("payload", { "idempotency-key": "h,2" }));
  assert.equal(other.headers.get("idempotent-replayed"), "true");
  assert.equal(await other.text(), "run 1: payload");
  assert.deepEqual(seen[0], ["http://api.test/hooks", "payload"]);
  assert.equal(state.runs, 1);
});

Deno.test("key: undefined is no key: the handler runs unguarded on the same bytes, each time, nothing stored", async () => {
  const { guarded, state, events, store } = keyed(() => undefined);
  for (const n of [1, 2]) {
    const response = await guarded(hook('{"no":"id"}'));
    assert.equal(await response.text(), `run ${n}: {"no":"id"}`);
    assert.equal(response.headers.get("idempotent-replayed"), null);
  }
  assert.equal(state.runs, 2);
  assert.deepEqual(events, []);
  assert.deepEqual((await store.stats()).completed, 0);
});

Deno.test("key: undefined with required is 400 problem-key-missing, the handler not run", async () => {
  const { guarded, state, events } = keyed(() => undefined, {
    required: true,
  });
  const response = await guarded(hook("{}"));
  assert.equal(response.status, 400);
  assert.equal((await response.json()).type, PROBLEM_TYPES.missing);
  assert.equal(state.runs, 0);
  assert.deepEqual(
    events.map((e) => e.type === "rejected" && [e.status, e.reason]),
    [[400, "missing"]],
  );
});

Deno.test("key: 254 and 255 characters are keys, 256 is 400 problem-key-malformed, as from the header", async () => {
  for (const [length, status] of [[254, 201], [255, 201], [256, 400]]) {
    const key = "k".repeat(length!);
    const { guarded, state, events } = keyed(() => key);
    const response = await guarded(hook("{}"));
    assert.equal(response.status, status, `${length}`);
    const header = await idempotency(() => new Response("", { status: 201 }), {
      scope: "global",
    })(post(key, "{}"));
    assert.equal(header.status, status, `header, ${length}`);
    await header.body?.cancel();
    if (status === 400) {
      const problem = await response.json();
      assert.equal(problem.type, PROBLEM_TYPES.malformed);
      assert.match(problem.detail, /256 characters long; at most 255/);
      assert.match(problem.detail, /the server's 'key' option/);
      assert.equal(state.runs, 0);
      assert.deepEqual(
        events.map((e) => e.type === "rejected" && [e.status, e.reason]),
        [[400, "malformed"]],
      );
    } else {
      await response.body?.cancel();
      assert.equal(state.runs, 1);
    }
  }
});

Deno.test("key: an empty key, a control character, a comma, a character beyond ASCII are 400; a quoted one is read as the header's", async () => {
  for (
    const bad of [
      "",
      "   ",
      "a\u0001b",
      "a,b",
      "caf\u00e9",
      "a b",
      '"a',
    ] as const
  ) {
    const { guarded, state } = keyed(() => bad);
    const response = await guarded(hook("{}"));
    assert.equal(response.status, 400, JSON.stringify(bad));
    assert.equal((await response.json()).type, PROBLEM_TYPES.malformed);
    assert.equal(state.runs, 0);
  }
  // '"a b"' and 'a' as sf-strings: the same keys as the header would name.
  const { guarded } = keyed((_r, body) => decoder.decode(body));
  await (await guarded(hook('"a b"'))).text();
  const same = await guarded(hook('"a b"'));
  assert.equal(same.headers.get("idempotent-replayed"), "true");
  await same.body?.cancel();
});

Deno.test("key: a throw is the misconfigured 500 before any claim, an option_error event and one log line", async () => {
  const { guarded, state, events, lines, store } = keyed(eventId);
  const response = await guarded(hook("not json"));
  assert.equal(response.status, 500);
  assert.equal((await response.json()).type, PROBLEM_TYPES.misconfigured);
  assert.equal(state.runs, 0);
  assert.deepEqual(events.map((e) => e.type), ["option_error"]);
  const { error } = events[0] as { error: Error };
  assert.equal(error.message, "'key' threw");
  assert.ok(error.cause instanceof SyntaxError);
  assert.equal(lines.length, 1);
  assert.match(
    lines[0]!,
    /^\[@idempotent\/http\] option_error: .*'key' threw \(cause: SyntaxError/,
  );
  assert.equal((await store.stats()).inFlight, 0);
  // Over HTTP: the problem, nothing escapes to the server.
  await using server = serveLocal(guarded);
  const http = await fetch(`${server.url}/hooks`, {
    method: "POST",
    body: "not json",
  });
  assert.equal(http.status, 500);
  assert.equal(http.headers.get("content-type"), "application/problem+json");
  await http.body?.cancel();
  assert.deepEqual(server.escaped, []);
  assert.equal(state.runs, 0);
});

Deno.test("key: a value that is neither a string nor undefined is the misconfigured 500, its TypeError the event's", async () => {
  const returns: [unknown, RegExp][] = [
    [42, /it returned a value of type number/],
    [null, /it returned null/],
    [{ id: "x" }, /it returned a value of type object/],
    [Symbol("k"), /it returned a value of type symbol/],
  ];
  for (const [value, message] of returns) {
    const { guarded, state, events, lines } = keyed(
      (() => value) as unknown as NonNullable<IdempotencyOptions["key"]>,
    );
    const response = await guarded(hook('{"id":42}'));
    assert.equal(response.status, 500);
    assert.equal((await response.json()).type, PROBLEM_TYPES.misconfigured);
    assert.equal(state.runs, 0);
    assert.deepEqual(events.map((e) => e.type), ["option_error"]);
    const { error } = events[0] as { error: Error };
    assert.ok(error instanceof TypeError);
    assert.match(error.message, /^'key' must return a string or undefined/);
    assert.match(error.message, message);
    assert.equal(lines.length, 1);
  }
});

Deno.test("key: a body over maxRequestBytes is 413 and the function never runs; at the limit it does", async () => {
  let asked = 0;
  const { guarded } = keyed(() => `k${++asked}`, { maxRequestBytes: 8 });
  const over = await guarded(hook("123456789"));
  assert.equal(over.status, 413);
  await over.body?.cancel();
  assert.equal(asked, 0);
  const at = await guarded(hook("12345678"));
  assert.equal(at.status, 201);
  await at.body?.cancel();
  assert.equal(asked, 1);
});

Deno.test("key: a method not guarded, or one skip leaves alone, never reads the body nor asks", async () => {
  let asked = 0;
  const { guarded } = keyed(() => `k${++asked}`, {
    skip: (request) => new URL(request.url).pathname === "/skip",
  });
  const put = await guarded(post(null, "{}", { method: "PUT" }));
  await put.body?.cancel();
  const skipped = await guarded(post(null, "{}", { path: "/skip" }));
  await skipped.body?.cancel();
  assert.equal(asked, 0);
  assert.throws(
    () =>
      idempotency(() => new Response(), {
        scope: "global",
        key: "id" as never,
      }),
    /'key' must be a function: current value is id/,
  );
});

Deno.test("key: a body-keyed request gets its ttl and lease functions' values, and their failure's 500", async () => {
  const asked: string[] = [];
  const { guarded, events } = keyed(() => "life-1", {
    advertiseLifetime: true,
    ttl: (request) => {
      asked.push(new URL(request.url).pathname);
      return 120_000;
    },
  });
  const response = await guarded(hook("{}"));
  assert.equal(response.status, 201);
  assert.equal(response.headers.get(LIFETIME_HEADER), "120");
  await response.body?.cancel();
  assert.deepEqual(asked, ["/hooks"]);
  const broken = keyed(() => "life-2", {
    lease: () => {
      throw new Error("no lease");
    },
  });
  const refused = await broken.guarded(hook("{}"));
  assert.equal(refused.status, 500);
  assert.equal((await refused.json()).type, PROBLEM_TYPES.misconfigured);
  assert.equal(broken.state.runs, 0);
  assert.deepEqual(broken.events.map((e) => e.type), ["option_error"]);
  assert.deepEqual(events.map((e) => e.type), ["claimed", "completed"]);
});
