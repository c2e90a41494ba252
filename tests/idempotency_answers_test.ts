// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's answers told apart: each outcome from its neighbour by
 * status, problem type and event (unreadable and unavailable included), and
 * the events' details (whether a claim took over a lapsed lease, a throwing
 * listener, none built unheard). The rest of the protocol is in
 * `idempotency_protocol_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency, PROBLEM_TYPES } from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { type IdempotencyEvent, reporter } from "../src/events.ts";
import { pattern } from "./_support/bytes.ts";
import { deferred } from "./_support/time.ts";
import { post } from "./_support/http.ts";
import { recorder, UnreadableStore } from "./_support/stores.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";

Deno.test("idempotency() tells each answer from its neighbour: status, problem type and event", async () => {
  const log = recorder();
  const down = new FaultyStore(new MemoryStore());
  down.failing.add("claim");
  const gate = deferred();
  const started = deferred();
  const handler = async (request: Request) => {
    if (request.headers.get("idempotency-key") === "held") {
      started.resolve();
      await gate.promise;
    }
    return new Response("x".repeat(20), { status: 201 });
  };
  type Options = Omit<Parameters<typeof idempotency>[1], "scope">;
  const guard = (options: Options = {}) =>
    idempotency(handler, {
      scope: "global",
      onEvent: log.onEvent,
      maxRequestBytes: 100,
      ...options,
    });
  const plain = guard();
  const t0 = performance.now();
  const broken = new Request("http://api.test/payments", {
    method: "POST",
    headers: { "idempotency-key": "cut" },
    body: new ReadableStream({
      pull: (controller) => controller.error(new Error("cut")),
    }),
  });
  const held = plain(post("held"));
  await started.promise;
  const cases: [
    string,
    () => Response | Promise<Response>,
    number,
    string,
    object,
  ][] = [
    ["missing", () => guard({ required: true })(post(null)), 400, "missing", {
      type: "rejected",
      status: 400,
      reason: "missing",
    }],
    ["malformed", () => plain(post("a b")), 400, "malformed", {
      type: "rejected",
      status: 400,
      reason: "malformed",
    }],
    ["too large", () => plain(post("big", pattern(101))), 413, "tooLarge", {
      type: "rejected",
      status: 413,
      reason: "too_large",
    }],
    ["incomplete", () => plain(broken), 400, "incomplete", {
      type: "rejected",
      status: 400,
      reason: "incomplete",
    }],
    ["in flight", () => plain(post("held")), 409, "inFlight", {
      type: "conflict",
      unreadable: false,
    }],
    [
      "unreadable",
      async () => {
        const store = new UnreadableStore({ unreadable: false });
        const guarded = guard({ store });
        await (await guarded(post("quick"))).text();
        store.unreadable = true;
        log.events.length = 0;
        return await guarded(post("u"));
      },
      500,
      "unreadable",
      { type: "conflict", unreadable: true, retryAfterMs: 2_500 },
    ],
    ["reused", () => plain(post("held", '{"other":1}')), 422, "reused", {
      type: "mismatch",
    }],
    [
      "unavailable",
      () => guard({ store: down })(post("down")),
      503,
      "unavailable",
      { type: "unavailable" },
    ],
  ];
  for (const [name, send, status, type, event] of cases) {
    log.events.length = 0;
    const res = await send();
    assert.equal(res.status, status, name);
    assert.equal((await res.json()).type, PROBLEM_TYPES[type as "missing"]);
    // A 503 follows the claim's store_error; every other answer is one event.
    const count = name === "unavailable" ? 2 : 1;
    assert.equal(log.events.length, count, `${name}: ${log.types()}`);
    if (count === 2) {
      assert.partialDeepStrictEqual(log.events[0], {
        type: "store_error",
        operation: "claim",
      });
    }
    assert.partialDeepStrictEqual(log.events.at(-1), event, name);
    const retried = ["in flight", "unavailable"].includes(name);
    assert.equal(res.headers.has("retry-after"), retried, name);
  }
  gate.resolve();
  await (await held).text();

  log.events.length = 0;
  const first = await plain(post("replayed"));
  assert.equal(first.headers.get("idempotent-replayed"), null);
  assert.equal(await first.text(), "x".repeat(20));
  const again = await plain(post("replayed"));
  assert.equal(again.status, 201);
  assert.equal(again.headers.get("idempotent-replayed"), "true");
  assert.equal(await again.text(), "x".repeat(20));
  const replayed = log.events.find((e) => e.type === "replayed");
  assert.deepEqual(
    replayed && { ...replayed, elapsedMs: 0 },
    { type: "replayed", slot: replayed?.slot, status: 201, elapsedMs: 0 },
    "a full replay names no omitted reason",
  );

  const capped = guard({ maxResponseBytes: 10 });
  await (await capped(post("capped"))).text();
  log.events.length = 0;
  await (await capped(post("capped"))).text();
  assert.partialDeepStrictEqual(log.events, [{
    type: "replayed",
    status: 201,
    omitted: "too_large",
  }]);

  // Each event's time is since this request began, not since some origin.
  const ms = performance.now() - t0;
  for (const e of log.events) {
    assert.ok(e.elapsedMs >= 0 && e.elapsedMs <= ms, `${e.elapsedMs}`);
  }
});

/** A store whose claims acquire as if each took over a lapsed lease. */
class RecoveringStore extends MemoryStore {
  override async claim(...args: Parameters<MemoryStore["claim"]>) {
    const claim = await super.claim(...args);
    return claim.state === "acquired" ? { ...claim, recovered: true } : claim;
  }
}

Deno.test("events: claimed says whether a lease was taken over; a throwing listener changes nothing; none is built unheard", async () => {
  for (
    const [store, recovered] of [[new MemoryStore(), false], [
      new RecoveringStore(),
      true,
    ]] as const
  ) {
    const log = recorder();
    const guarded = idempotency(() => new Response("ok"), {
      scope: "global",
      store,
      onEvent: log.onEvent,
    });
    await (await guarded(post("k"))).text();
    assert.partialDeepStrictEqual(log.events[0], {
      type: "claimed",
      recovered,
    });
  }

  const throwing = idempotency(() => new Response("ok", { status: 201 }), {
    scope: "global",
    onEvent: () => {
      throw new Error("listener");
    },
  });
  const first = await throwing(post("t"));
  assert.equal(first.status, 201);
  assert.equal(await first.text(), "ok");
  const again = await throwing(post("t"));
  assert.equal(again.headers.get("idempotent-replayed"), "true");

  let built = 0;
  const make = () => {
    built++;
    return { type: "mismatch", slot: null } as const;
  };
  reporter(undefined)(make, 0);
  assert.equal(built, 0, "no listener, no event built");
  const seen: IdempotencyEvent[] = [];
  reporter((event) => seen.push(event))(make, performance.now());
  assert.equal(built, 1);
  assert.equal(seen[0]?.type, "mismatch");
});
