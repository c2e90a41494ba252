// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A client nobody here wrote: the official Stripe SDK (`stripe`, pinned in
 * deno.json) against a Stripe-like `/v1/charges` served on loopback and
 * guarded by the middleware. The SDK raises only on a body with an `error`
 * field and never reads `Retry-After`, so: RFC 9457 problems resolve as if
 * they were the charge; the Stripe-shaped `renderProblem` makes them the
 * SDK's errors; `waitForInFlight` hands a duplicate the replay. The renderer's
 * own tests are in `tests/problem_renderer_test.ts`.
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
import { serveLocal } from "./_support/http.ts";
import { deferred } from "./_support/time.ts";
import { asStripe } from "./_problem_fixtures.ts";

const API_KEY = "sk_test_idempotent";
const ACCOUNTS = new Map([[`Bearer ${API_KEY}`, "acct_1"]]);

/** The Stripe-like API; `hold`, when set, is awaited by every charge's handler. */
function stripeLike(
  options: Partial<IdempotencyOptions> = {},
  maxNetworkRetries = 0, // its retries wait 0.5 s and more, Retry-After unread
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
    port: server.port,
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

Deno.test("Stripe SDK: a key reused with another payload raises its idempotency error under a Stripe-shaped renderProblem", async () => {
  const { state, server, stripe } = stripeLike({ renderProblem: asStripe });
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
      assert.equal(error.code, "idempotency_conflict");
      assert.equal(error.headers?.["cache-control"], "no-store");
      return true;
    },
  );
  assert.equal(state.runs, 1);
});

Deno.test("Stripe SDK: a duplicate of a running charge raises a 409 with Retry-After, or with waitForInFlight gets the replay", async (t) => {
  await t.step("without waiting: the SDK's error, Retry-After 1", async () => {
    const { state, server, stripe } = stripeLike({ renderProblem: asStripe });
    await using _ = server;
    const release = deferred();
    state.hold = release.promise;
    const first = charge(stripe, 100, "k1");
    await state.entered.promise;
    await assert.rejects(charge(stripe, 100, "k1"), (error: unknown) => {
      assert.ok(error instanceof Stripe.errors.StripeAPIError);
      assert.equal(error.statusCode, 409);
      assert.equal(error.rawType, "idempotency_error");
      assert.equal(error.headers?.["retry-after"], "1");
      return true;
    });
    release.resolve();
    assert.equal((await first).id, "ch_1");
    assert.equal(state.runs, 1);
  });

  await t.step("with waitForInFlight: both resolve to one charge", async () => {
    const waiting = deferred();
    const onEvent = (event: IdempotencyEvent) => {
      if (event.type === "waiting") waiting.resolve();
    };
    const { state, server, stripe } = stripeLike({
      renderProblem: asStripe,
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

Deno.test("Stripe SDK: an unreadable record (sealed under a key no longer listed) raises a 500 api_error, its retry never runs the charge", async () => {
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
      renderProblem: asStripe,
      onEvent: (e) =>
        void (e.type === "conflict" && e.unreadable && unreadable++),
      logger: false,
    },
    1, // the SDK retries any 5xx: the retry is answered the same, nothing runs
  );
  await using _after = after.server;
  await assert.rejects(
    charge(after.stripe, 100, "k1"),
    (error: unknown) => {
      assert.ok(error instanceof Stripe.errors.StripeAPIError);
      assert.equal(error.statusCode, 500);
      assert.equal(error.code, "idempotency_record_unreadable");
      assert.equal(error.headers?.["retry-after"], undefined);
      return true;
    },
  );
  assert.equal(unreadable, 2, "the SDK's attempt and its retry");
  assert.equal(before.state.runs + after.state.runs, 1);
});
