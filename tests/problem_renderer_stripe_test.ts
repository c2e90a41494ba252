// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A client nobody here wrote: the official Stripe SDK (`stripe`, pinned in
 * deno.json) against a Stripe-like `/v1/charges` served on loopback and
 * guarded by the middleware. The SDK raises only on a body with an `error`
 * field and never reads `Retry-After`, so: RFC 9457 problems resolve as if
 * they were the charge; the `stripeProblems()` preset makes them the SDK's
 * errors (`StripeIdempotencyError` for a reused key) and its retries ours (a
 * 409 retried into the replay, a dropped response retried into the replay, an
 * unreadable record's 500 not retried); `waitForInFlight` hands a duplicate
 * the replay without a retry. The renderer's own tests are in
 * `tests/problem_renderer_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import Stripe from "stripe";
import {
  idempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
  MemoryStore,
  PROBLEM_TYPES,
} from "../mod.ts";
import { stripeProblems } from "../src/presets/presets.ts";
import { droppingProxy, serveLocal } from "./_support/http.ts";
import { deferred } from "./_support/time.ts";

const API_KEY = "sk_test_idempotent";
const ACCOUNTS = new Map([[`Bearer ${API_KEY}`, "acct_1"]]);

/**
 * The Stripe-like API; `hold`, when set, is awaited by every charge's
 * handler. The SDK talks to `port` when given (a proxy's), else the API's.
 */
function stripeLike(
  options: Partial<IdempotencyOptions> = {},
  maxNetworkRetries = 0, // its retries wait 0.5 s and more, Retry-After unread
  port?: (api: number) => number,
) {
  const state = {
    runs: 0,
    hold: undefined as Promise<void> | undefined,
    entered: deferred(),
  };
  const handler = idempotency(async (request) => {
    const form = new URLSearchParams(await request.text());
    const id = `ch_${++state.runs}`;
    state.entered.resolve();
    await state.hold;
    const amount = Number(form.get("amount"));
    return Response.json({ id, object: "charge", amount });
  }, {
    scope: (request) => {
      const account = ACCOUNTS.get(request.headers.get("authorization") ?? "");
      if (account === undefined) throw new Error("unauthenticated");
      return account;
    },
    ...options,
  });
  const server = serveLocal(handler);
  const stripe = new Stripe(API_KEY, {
    host: "127.0.0.1",
    port: port?.(server.port) ?? server.port,
    protocol: "http",
    maxNetworkRetries,
  });
  return { state, server, stripe };
}

function charge(stripe: Stripe, amount: number, idempotencyKey: string) {
  return stripe.charges.create(
    { amount, currency: "usd", source: "tok_visa" },
    { idempotencyKey },
  );
}

/** The replay header of what the SDK resolved: its `lastResponse` is fetch's `Response` here. */
function replayed(resource: { lastResponse: unknown }): string | null {
  return (resource.lastResponse as Response).headers.get("idempotent-replayed");
}

Deno.test("Stripe SDK: an RFC 9457 422 resolves as if it were the charge (why renderProblem exists)", async () => {
  const { server, stripe } = stripeLike();
  await using _ = server;
  const first = await charge(stripe, 100, "k1");
  assert.equal(first.id, "ch_1");
  const reused = await charge(stripe, 200, "k1"); // no throw
  assert.equal(reused.id, undefined);
  const problem = reused as unknown as { type: string; status: number };
  assert.equal(problem.type, PROBLEM_TYPES.reused);
  assert.equal(problem.status, 422);
});

Deno.test("Stripe SDK: a key reused with another payload raises StripeIdempotencyError under stripeProblems()", async () => {
  const { state, server, stripe } = stripeLike(stripeProblems());
  await using _ = server;
  const first = await charge(stripe, 100, "k1");
  assert.equal(first.id, "ch_1");
  const replay = await charge(stripe, 100, "k1");
  assert.equal(replay.id, "ch_1");
  assert.equal(replayed(replay), "true");
  await assert.rejects(
    charge(stripe, 200, "k1"),
    (error: unknown) => {
      assert.ok(error instanceof Stripe.errors.StripeIdempotencyError);
      assert.equal(error.statusCode, 400);
      assert.equal(error.type, "StripeIdempotencyError");
      assert.equal(error.rawType, "idempotency_error");
      assert.equal(error.code, "idempotency_conflict");
      assert.equal(error.doc_url, PROBLEM_TYPES.reused);
      assert.equal(error.headers?.["cache-control"], "no-store");
      assert.equal(error.headers?.["stripe-should-retry"], "false");
      return true;
    },
  );
  assert.equal(state.runs, 1);
});

Deno.test("Stripe SDK: a duplicate of a running charge raises a 409 with Retry-After, or with waitForInFlight gets the replay", async (t) => {
  await t.step("without retries: the SDK's error, Retry-After 1", async () => {
    const { state, server, stripe } = stripeLike(stripeProblems());
    await using _ = server;
    const release = deferred();
    state.hold = release.promise;
    const first = charge(stripe, 100, "k1");
    await state.entered.promise;
    await assert.rejects(charge(stripe, 100, "k1"), (error: unknown) => {
      assert.ok(error instanceof Stripe.errors.StripeAPIError);
      assert.equal(error.statusCode, 409);
      assert.ok(!(error instanceof Stripe.errors.StripeIdempotencyError));
      assert.equal(error.rawType, "idempotency_error");
      assert.equal(error.code, "idempotency_key_in_use");
      assert.equal(error.headers?.["retry-after"], "1");
      assert.equal(error.headers?.["stripe-should-retry"], "true");
      return true;
    });
    release.resolve();
    assert.equal((await first).id, "ch_1");
    assert.equal(state.runs, 1);
  });

  await t.step(
    "with the SDK's retries: its retry gets the replay",
    async () => {
      const refused = deferred();
      const answers: string[] = [];
      const { state, server, stripe } = stripeLike({
        ...stripeProblems(),
        onEvent: (e) => {
          if (e.type === "conflict" || e.type === "replayed") {
            answers.push(e.type);
          }
          if (e.type === "conflict") refused.resolve();
        },
      }, 3);
      await using _ = server;
      const release = deferred();
      state.hold = release.promise;
      const first = charge(stripe, 100, "k1");
      await state.entered.promise;
      const duplicate = charge(stripe, 100, "k1");
      await refused.promise; // answered 409: the SDK waits, then retries
      release.resolve();
      const [original, replay] = await Promise.all([first, duplicate]);
      assert.equal(original.id, "ch_1");
      assert.equal(replay.id, "ch_1");
      assert.equal(replayed(replay), "true");
      assert.equal(state.runs, 1);
      assert.equal(answers[0], "conflict", "the duplicate's first answer");
      assert.equal(answers.at(-1), "replayed", "its retry's");
    },
  );

  await t.step("with waitForInFlight: both resolve to one charge", async () => {
    const waiting = deferred();
    const onEvent = (event: IdempotencyEvent) => {
      if (event.type === "waiting") waiting.resolve();
    };
    const { state, server, stripe } = stripeLike({
      ...stripeProblems(),
      waitForInFlight: 60_000,
      onEvent,
    }, 2); // the SDK's default retries
    await using _ = server;
    let sent = 0;
    stripe.on("request", () => sent++);
    const release = deferred();
    state.hold = release.promise;
    const first = charge(stripe, 100, "k1");
    await state.entered.promise;
    const duplicate = charge(stripe, 100, "k1");
    await waiting.promise; // parked on the running first, not answered 409
    release.resolve();
    const [original, replay] = await Promise.all([first, duplicate]);
    assert.equal(original.id, "ch_1");
    assert.equal(replay.id, "ch_1");
    assert.equal(replayed(replay), "true");
    assert.equal(state.runs, 1);
    assert.equal(sent, 2, "no retry by the SDK");
  });
});

Deno.test("Stripe SDK: an unreadable record (sealed under a key no longer listed) raises a 500 api_error that the SDK does not retry", async () => {
  const store = new MemoryStore();
  const aes = { name: "AES-GCM", length: 256 };
  const key = async (id: string) => ({
    id,
    key: await crypto.subtle.generateKey(aes, false, ["encrypt", "decrypt"]),
  });
  const before = stripeLike({ store, encryption: { keys: [await key("k1")] } });
  await using _before = before.server;
  assert.equal((await charge(before.stripe, 100, "k1")).id, "ch_1");
  // Redeployed with another key: the record cannot be opened.
  let unreadable = 0;
  const after = stripeLike(
    {
      store,
      encryption: { keys: [await key("k2")] },
      ...stripeProblems(),
      onEvent: (e) =>
        void (e.type === "conflict" && e.unreadable && unreadable++),
      logger: false,
    },
    1, // the SDK retries a 5xx unless told not to: Stripe-Should-Retry says no
  );
  await using _after = after.server;
  await assert.rejects(
    charge(after.stripe, 100, "k1"),
    (error: unknown) => {
      assert.ok(error instanceof Stripe.errors.StripeAPIError);
      assert.equal(error.statusCode, 500);
      assert.equal(error.code, "idempotency_record_unreadable");
      assert.equal(error.rawType, "api_error");
      assert.equal(error.headers?.["retry-after"], undefined);
      assert.equal(error.headers?.["stripe-should-retry"], "false");
      return true;
    },
  );
  assert.equal(unreadable, 1, "the SDK's attempt, not retried");
  assert.equal(before.state.runs + after.state.runs, 1);
});

Deno.test("Stripe SDK: a charge whose response was dropped resolves to the replay on the SDK's retry", async () => {
  let proxy: ReturnType<typeof droppingProxy> | undefined;
  const { state, server, stripe } = stripeLike(stripeProblems(), 1, (api) => {
    proxy = droppingProxy(api);
    return proxy.port;
  });
  await using _ = server;
  await using _proxy = proxy!;
  let sent = 0;
  stripe.on("request", () => sent++);
  const resolved = await charge(stripe, 100, "k1");
  assert.equal(proxy!.dropped, 1, "the first answer never reached the SDK");
  assert.equal(sent, 2, "the SDK's attempt and its retry");
  assert.equal(resolved.id, "ch_1");
  assert.equal(resolved.amount, 100);
  assert.equal(replayed(resolved), "true");
  assert.equal(state.runs, 1);
});

Deno.test("Stripe SDK: stripeProblems() answers the SDK's errors for a bad key, and retries a 503 into the charge", async () => {
  const { server, stripe } = stripeLike(stripeProblems());
  await using _ = server;
  await assert.rejects(charge(stripe, 100, "a b"), (error: unknown) => {
    assert.ok(error instanceof Stripe.errors.StripeInvalidRequestError);
    assert.equal(error.statusCode, 400);
    assert.equal(error.code, "idempotency_key_invalid");
    return true;
  });
  // The store down for one claim: a 503 the SDK retries (Stripe-Should-Retry).
  const store = new MemoryStore();
  const claim = store.claim.bind(store);
  let failing = 1;
  store.claim = (slot, options) =>
    failing-- > 0 ? Promise.reject(new Error("down")) : claim(slot, options);
  const flaky = stripeLike({ ...stripeProblems(), store, logger: false }, 1);
  await using _flaky = flaky.server;
  let sent = 0;
  flaky.stripe.on("request", () => sent++);
  assert.equal((await charge(flaky.stripe, 100, "k2")).id, "ch_1");
  assert.equal(sent, 2, "the 503 and its retry");
  assert.equal(failing, -1, "the store was asked twice");
});
