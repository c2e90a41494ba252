// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Per-request lifetimes: `ttl` and `lease` as functions of the request, each
 * route's key expiring at its own time (MemoryStore on fake time, RedisStore
 * on the server's `PX`), their values checked per request at n−1 / n / n+1,
 * a function that throws or returns garbage answered 500 with an event and a
 * line, the handler never run; and `advertiseLifetime`'s `Idempotency-TTL`
 * on the first response and its replays, the record unchanged.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LIFETIME_HEADER, PROBLEM_TYPES } from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { slotOf } from "../src/fingerprint.ts";
import type { IdempotencyOptions } from "../src/options.ts";
import { deferred, FakeClock, until, waitFor } from "./_support/time.ts";
import { post } from "./_support/http.ts";
import { recorder } from "./_support/stores.ts";
import { idempotencyOn } from "./_support/idempotency.ts";
import { redisTest } from "./_support/redis.ts";

const pathOf = (request: Request) => new URL(request.url).pathname;

/** A guarded handler on fake time that counts its runs by path. */
function routes(options: Omit<IdempotencyOptions, "scope">) {
  const time = new FakeClock();
  const store = new MemoryStore({ clock: () => time.now() });
  const runs = new Map<string, number>();
  const guarded = idempotencyOn(time, (request) => {
    const path = pathOf(request);
    runs.set(path, (runs.get(path) ?? 0) + 1);
    return new Response(`${path} ${runs.get(path)}`, { status: 201 });
  }, { scope: "global", store, ...options });
  const send = async (path: string, key = path) => {
    const response = await guarded(post(key, "{}", { path }));
    return { response, text: await response.text() };
  };
  return { time, store, runs, guarded, send };
}

Deno.test("a ttl function gives each route its own lifetime on MemoryStore: each key replays until its own ttl, then runs again", async () => {
  const { time, send } = routes({
    ttl: (request) => pathOf(request) === "/short" ? 10_000 : 60_000,
    lease: 1_000,
  });
  assert.equal((await send("/short")).text, "/short 1");
  assert.equal((await send("/long")).text, "/long 1");
  await time.advance(9_999); // n−1 for /short
  assert.equal((await send("/short")).text, "/short 1");
  assert.equal((await send("/long")).text, "/long 1");
  await time.advance(1); // n: forgotten, so it runs again
  assert.equal((await send("/short")).text, "/short 2");
  assert.equal((await send("/long")).text, "/long 1");
  await time.advance(49_999); // n−1 for /long
  assert.equal((await send("/long")).text, "/long 1");
  await time.advance(1);
  assert.equal((await send("/long")).text, "/long 2");
});

Deno.test("a lease function gives each route its own lease: a short one is renewed while a long one's claim set the heartbeat's pace", async () => {
  const time = new FakeClock();
  const store = new MemoryStore({ clock: () => time.now() });
  const gate = deferred();
  const log = recorder();
  let runs = 0;
  const guarded = idempotencyOn(time, async () => {
    runs++;
    await gate.promise;
    return new Response("done");
  }, {
    scope: "global",
    store,
    ttl: 600_000,
    lease: (request) => pathOf(request) === "/short" ? 3_000 : 60_000,
    onEvent: log.onEvent,
    logger: false,
  });
  const long = guarded(post("long", "{}", { path: "/long" }));
  await until(() => runs === 1, "the long claim");
  const short = guarded(post("short", "{}", { path: "/short" }));
  await until(() => runs === 2, "the short claim");
  // Past the short lease: still held, since the heartbeat ticks at its pace.
  await time.advance(3_500);
  const duplicate = await guarded(post("short", "{}", { path: "/short" }));
  assert.equal(duplicate.status, 409);
  await duplicate.body?.cancel();
  const conflict = log.events.find((e) => e.type === "conflict");
  assert.ok(conflict?.type === "conflict");
  assert.ok(conflict.retryAfterMs <= 3_000, `${conflict.retryAfterMs}`);
  assert.equal(runs, 2);
  gate.resolve();
  assert.equal((await long).status, 200);
  assert.equal((await short).status, 200);
});

Deno.test("advertiseLifetime: Idempotency-TTL is the request's ttl in whole seconds on the first response and its replays, never in the record", async () => {
  const cases: [number, string][] = [[1_999, "1"], [2_000, "2"], [2_001, "2"]];
  for (const [ttl, seconds] of cases) {
    const { store, send } = routes({
      ttl: () => ttl,
      lease: 1_000,
      advertiseLifetime: true,
    });
    const first = await send("/pay");
    assert.equal(first.response.headers.get(LIFETIME_HEADER), seconds);
    const replay = await send("/pay");
    assert.equal(replay.response.headers.get("idempotent-replayed"), "true");
    assert.equal(replay.response.headers.get(LIFETIME_HEADER), seconds);
    const claim = await store.claim(slotOf("", "/pay"), {
      fingerprint: "",
      leaseMs: 1,
      ttlMs: 1,
    });
    assert.ok(claim.state === "completed");
    assert.deepEqual(claim.response.headers, [
      ["content-type", "text/plain;charset=UTF-8"],
    ]);
  }
});

Deno.test("advertiseLifetime is off by default: no Idempotency-TTL, and a handler's own header of that name replays as recorded", async () => {
  const time = new FakeClock();
  const store = new MemoryStore({ clock: () => time.now() });
  const own = (advertiseLifetime?: boolean) =>
    idempotencyOn(
      time,
      () => new Response("ok", { headers: { "idempotency-ttl": "7" } }),
      {
        scope: "global",
        store,
        ttl: 86_400_000,
        ...(advertiseLifetime === undefined ? {} : { advertiseLifetime }),
      },
    );
  const off = own();
  assert.equal((await off(post("k1"))).headers.get(LIFETIME_HEADER), "7");
  assert.equal((await off(post("k1"))).headers.get(LIFETIME_HEADER), "7");
  const plain = idempotencyOn(time, () => new Response("ok"), {
    scope: "global",
    store,
  });
  const first = await plain(post("k2"));
  const replay = await plain(post("k2"));
  assert.equal(first.headers.has(LIFETIME_HEADER), false);
  assert.equal(replay.headers.has(LIFETIME_HEADER), false);
  // On, the middleware's value wins over the handler's, live and replayed.
  const on = own(true);
  assert.equal((await on(post("k3"))).headers.get(LIFETIME_HEADER), "86400");
  assert.equal((await on(post("k3"))).headers.get(LIFETIME_HEADER), "86400");
  assert.equal((await off(post("k3"))).headers.get(LIFETIME_HEADER), "7");
});

Deno.test("advertiseLifetime on a response whose headers are immutable (Response.redirect) answers a copy with the header", async () => {
  const guarded = idempotencyOn(
    new FakeClock(),
    () => Response.redirect("http://api.test/orders/1", 303),
    {
      scope: "global",
      advertiseLifetime: true,
      cacheable: (response) => response.status < 400, // the redirect too
    },
  );
  for (const replayed of [null, "true"]) {
    const response = await guarded(post("k1"));
    assert.equal(response.status, 303);
    assert.equal(response.headers.get("location"), "http://api.test/orders/1");
    assert.equal(response.headers.get(LIFETIME_HEADER), "86400");
    assert.equal(response.headers.get("idempotent-replayed"), replayed);
  }
});

/** Sends one request under `options`; its answer, the runs and the events. */
async function once(options: Omit<IdempotencyOptions, "scope">) {
  const lines: string[] = [];
  const log = recorder();
  // The store reads the same fake time: a 1 ms ttl must not lapse on a
  // loaded machine between the answer and the peek.
  const clock = new FakeClock();
  const store = new MemoryStore({ clock: () => clock.now() });
  let runs = 0;
  const guarded = idempotencyOn(clock, () => {
    runs++;
    return new Response("ran");
  }, {
    scope: "global",
    store,
    onEvent: log.onEvent,
    logger: {
      warn: (l: string) => lines.push(l),
      error: (l: string) => lines.push(l),
    },
    ...options,
  });
  const response = await guarded(post("k1"));
  const held = await store.peek(slotOf("", "k1"));
  return { response, runs, log, lines, held: held.state };
}

Deno.test("ttl and lease functions are held to the numbers' bounds per request: a positive integer, the lease at most the ttl (n−1, n, n+1)", async () => {
  const cases: [Omit<IdempotencyOptions, "scope">, boolean][] = [
    [{ ttl: () => 0, lease: 1 }, false],
    [{ ttl: () => 1, lease: 1 }, true],
    [{ ttl: () => 2, lease: 1 }, true],
    [{ ttl: () => Number.MAX_SAFE_INTEGER, lease: 1 }, true],
    [{ ttl: () => Number.MAX_SAFE_INTEGER + 1, lease: 1 }, false],
    [{ ttl: 1_000, lease: () => 999 }, true],
    [{ ttl: 1_000, lease: () => 1_000 }, true],
    [{ ttl: 1_000, lease: () => 1_001 }, false],
    [{ ttl: () => 1_000, lease: () => 1_001 }, false],
    [{ ttl: () => 1_000 }, false], // the default lease, 30 s, is past it
    [{ ttl: () => 30_000 }, true],
    [{ lease: () => 0 }, false],
    [{ lease: () => 1 }, true],
  ];
  for (const [options, ok] of cases) {
    const shown = JSON.stringify(options, (_k, v) => `${v}`);
    const { response, runs, log, held } = await once(options);
    assert.equal(response.status, ok ? 200 : 500, shown);
    assert.equal(runs, ok ? 1 : 0, shown);
    assert.equal(held, ok ? "completed" : "absent", shown);
    assert.equal(log.types().includes("option_error"), !ok, shown);
    if (!ok) await response.body?.cancel();
  }
});

Deno.test("a ttl or lease function that throws or returns garbage answers 500 problem-misconfigured, runs nothing, claims nothing, and is an option_error and a logged line", async () => {
  const boom = new Error("no route table");
  const garbage: [string, () => unknown, RegExp][] = [
    ["ttl", () => NaN, /'ttl' must be a positive integer .*NaN/],
    ["ttl", () => 1.5, /'ttl' must be a positive integer .*1\.5/],
    ["ttl", () => "60000", /'ttl' must be .*"60000"/],
    ["ttl", () => -1, /'ttl' must be .*-1/],
    ["ttl", () => Infinity, /'ttl' must be .*Infinity/],
    ["ttl", () => undefined, /'ttl' must be .*undefined/],
    ["lease", () => null, /'lease' must be .*null/],
    ["lease", () => ({}), /'lease' must be .*object/],
    ["ttl", () => Promise.resolve(1_000), /'ttl' must be .*object Promise/],
    ["ttl", () => {
      throw boom;
    }, /'ttl' threw \(cause: Error: no route table\)/],
    ["lease", () => {
      throw boom;
    }, /'lease' threw/],
  ];
  for (const [name, fn, line] of garbage) {
    const { response, runs, log, lines, held } = await once({ [name]: fn });
    assert.equal(response.status, 500, `${name}: ${fn}`);
    assert.equal(
      response.headers.get("content-type"),
      "application/problem+json",
    );
    const problem = await response.json();
    assert.equal(problem.type, PROBLEM_TYPES.misconfigured);
    assert.equal(runs, 0);
    assert.equal(held, "absent");
    const event = log.events.find((e) => e.type === "option_error");
    assert.ok(event?.type === "option_error" && event.slot === null);
    if (String(fn).includes("throw")) {
      assert.equal((event.error as Error).cause, boom);
    }
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /^\[@idempotent\/http\] option_error: /);
    assert.match(lines[0]!, line);
  }
});

Deno.test("numbers stay checked at construction: a function for one lifetime defers only the check that needs it", () => {
  const make = (options: Omit<IdempotencyOptions, "scope">) => () =>
    idempotencyOn(new FakeClock(), () => new Response(), {
      scope: "global",
      ...options,
    });
  assert.throws(make({ ttl: 0 }), RangeError);
  assert.throws(make({ ttl: () => 1, lease: 0 }), RangeError);
  assert.throws(make({ ttl: 1_000, lease: 1_001 }), RangeError);
  make({ ttl: () => 1, lease: 1_001 })(); // checked per request instead
  assert.throws(make({ advertiseLifetime: "yes" as never }), TypeError);
});

redisTest(
  "a ttl function gives each route its own lifetime on RedisStore: each record's PX is its route's, and the short one runs again once the server expired it",
  "cors_lifetime",
  async (client, prefix) => {
    const runs = new Map<string, number>();
    const guarded = idempotencyOn(new FakeClock(), (request) => {
      const path = pathOf(request);
      runs.set(path, (runs.get(path) ?? 0) + 1);
      return new Response(`${path} ${runs.get(path)}`);
    }, {
      scope: "global",
      store: new RedisStore({ client, prefix }),
      ttl: (request) => pathOf(request) === "/short" ? 1_500 : 600_000,
      lease: 1_000,
      advertiseLifetime: true,
    });
    const send = async (path: string) => {
      const response = await guarded(post(path, "{}", { path }));
      return { response, text: await response.text() };
    };
    const short = await send("/short");
    assert.equal(short.response.headers.get(LIFETIME_HEADER), "1");
    const long = await send("/long");
    assert.equal(long.response.headers.get(LIFETIME_HEADER), "600");
    // The server's own clock holds each key for its route's ttl.
    const shortLeft = await client.pTTL(prefix + slotOf("", "/short"));
    const longLeft = await client.pTTL(prefix + slotOf("", "/long"));
    assert.ok(shortLeft > 0 && shortLeft <= 1_500, `short: ${shortLeft}`);
    assert.ok(longLeft > 1_500 && longLeft <= 600_000, `long: ${longLeft}`);
    await waitFor(
      "the short key to expire on the server",
      async () => (await send("/short")).text === "/short 2",
    );
    const replay = await send("/long");
    assert.equal(replay.text, "/long 1");
    assert.equal(replay.response.headers.get(LIFETIME_HEADER), "600");
  },
);
