// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `acpProblems()` against a client written from the Agentic Commerce
 * Protocol's checkout RFC (`rfcs/rfc.agentic_checkout.md`, §6 "Idempotency,
 * Retries & Concurrency"), over a real `Deno.serve`: the headers it sends
 * (§3.1: `Authorization`, `API-Version`, `Idempotency-Key` on every POST),
 * the codes and statuses it reads (§6.4: 400 `idempotency_key_required`,
 * 422 `idempotency_conflict`, 409 `idempotency_in_flight` with
 * `Retry-After`), replays with `Idempotent-Replayed: true` (§6.3), keys per
 * caller and endpoint (§6.1), 5xx never replayed and 4xx replayed (§6.5),
 * and keys kept 24 hours at least (§6.6).
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { idempotency, type IdempotencyStore, MemoryStore } from "../mod.ts";
import { ACP_MIN_TTL, acpProblems } from "../src/presets/presets.ts";
import { serveLocal } from "./_support/http.ts";
import { deferred } from "./_support/time.ts";
import { UnreadableStore } from "./_support/stores.ts";

/** An ACP error (§3.1, flat). */
interface AcpError {
  type: string;
  code: string;
  message: string;
}

/** What the client got: the status, the body, and whether it was a replay. */
interface Answer {
  status: number;
  body: Record<string, unknown>;
  replayed: boolean;
  retryAfter: string | null;
}

/**
 * An ACP client (the agent's side): every POST carries a fresh UUID v4 key
 * unless `key` is given; a 409 `idempotency_in_flight` is retried with the
 * same key after `wait(Retry-After)` (§6.4: "Yes (honor Retry-After)"), up to
 * `retries` times.
 */
function acpClient(base: string, token: string) {
  return async (path: string, body: unknown, init: {
    key?: string | null;
    wait?: (seconds: number) => Promise<void>;
    retries?: number;
  } = {}): Promise<Answer> => {
    const key = init.key === undefined ? crypto.randomUUID() : init.key;
    const headers: Record<string, string> = {
      "authorization": `Bearer ${token}`,
      "content-type": "application/json",
      "api-version": "2026-01-16",
      "request-id": crypto.randomUUID(),
    };
    if (key !== null) headers["idempotency-key"] = key;
    for (let attempt = 0;; attempt++) {
      const response = await fetch(`${base}${path}`, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
      });
      const answer = {
        status: response.status,
        body: await response.json(),
        replayed: response.headers.get("idempotent-replayed") === "true",
        retryAfter: response.headers.get("retry-after"),
      };
      const inFlight = answer.status === 409 &&
        answer.body.code === "idempotency_in_flight";
      if (!inFlight || attempt >= (init.retries ?? 0) || !init.wait) {
        return answer;
      }
      await init.wait(Number(answer.retryAfter));
    }
  };
}

/** A merchant's checkout API (§4) behind `acpProblems()`. */
function merchant(store: IdempotencyStore = new MemoryStore()) {
  const state = {
    runs: 0,
    hold: undefined as Promise<void> | undefined,
    entered: deferred(),
    /** The next complete's answer: the PSP down (500), or 3DS required (400). */
    next: [] as ("psp_down" | "requires_3ds")[],
  };
  const handler = idempotency(async (request) => {
    state.runs++;
    state.entered.resolve();
    await state.hold;
    const body = await request.json();
    const path = new URL(request.url).pathname;
    if (path === "/checkout_sessions") {
      return Response.json({
        id: `cs_${state.runs}`,
        status: "ready_for_payment",
        currency: "usd",
        line_items: body.items,
      }, { status: 201 });
    }
    const next = state.next.shift();
    if (next === "psp_down") {
      return Response.json(
        { type: "processing_error", code: "psp_unavailable", message: "PSP" },
        { status: 500 },
      );
    }
    if (next === "requires_3ds") {
      return Response.json({
        type: "invalid_request",
        code: "requires_3ds",
        message: "This checkout session requires issuer authentication.",
        param: "$.authentication_result",
      }, { status: 400 });
    }
    const id = path.split("/")[2];
    return Response.json({
      id,
      status: "completed",
      order: { id: `ord_${state.runs}`, checkout_session_id: id },
    });
  }, {
    store,
    logger: false,
    ...acpProblems({
      scope: (request) => {
        const auth = request.headers.get("authorization") ?? "";
        if (!auth.startsWith("Bearer ")) throw new Error("unauthenticated");
        return auth.slice("Bearer ".length);
      },
    }),
  });
  return { state, server: serveLocal(handler) };
}

const ITEMS = { items: [{ id: "item_456", quantity: 1 }] };

Deno.test("ACP §6.1: a POST without Idempotency-Key is a 400 idempotency_key_required, and nothing runs", async () => {
  const { state, server } = merchant();
  await using _ = server;
  const post = acpClient(server.url, "agent_codes");
  const answer = await post("/checkout_sessions", ITEMS, { key: null });
  assert.equal(answer.status, 400);
  const error = answer.body as unknown as AcpError;
  assert.equal(error.type, "invalid_request");
  assert.equal(error.code, "idempotency_key_required");
  assert.match(error.message, /idempotency-key/i);
  assert.deepEqual(Object.keys(error), ["type", "code", "message"]);
  assert.equal(state.runs, 0);
});

Deno.test("ACP §6.1: a key of 255 characters is accepted, 256 is not", async () => {
  const { state, server } = merchant();
  await using _ = server;
  const post = acpClient(server.url, "agent_codes");
  for (
    const [length, status] of [[254, 201], [255, 201], [256, 400]] as const
  ) {
    const answer = await post("/checkout_sessions", ITEMS, {
      key: "k".repeat(length - 1) + `${length % 10}`,
    });
    assert.equal(answer.status, status, `${length} characters`);
    if (status === 400) {
      assert.equal(answer.body.type, "invalid_request");
      assert.equal(answer.body.code, "idempotency_key_invalid");
    }
  }
  assert.equal(state.runs, 2);
});

Deno.test("ACP §6.3, §6.4: the same key and body replays the 201; another body is a 422 idempotency_conflict", async () => {
  const { state, server } = merchant();
  await using _ = server;
  const post = acpClient(server.url, "agent_codes");
  const key = crypto.randomUUID();
  const created = await post("/checkout_sessions", ITEMS, { key });
  assert.equal(created.status, 201);
  assert.equal(created.replayed, false);
  const replay = await post("/checkout_sessions", ITEMS, { key });
  assert.equal(replay.status, 201, "the original status (§6.3)");
  assert.equal(replay.replayed, true);
  assert.deepEqual(replay.body, created.body);
  const other = { items: [{ id: "item_456", quantity: 2 }] };
  const conflict = await post("/checkout_sessions", other, { key });
  assert.equal(conflict.status, 422);
  assert.deepEqual(
    [conflict.body.type, conflict.body.code],
    ["invalid_request", "idempotency_conflict"],
  );
  assert.equal(conflict.retryAfter, null, "not retryable (§6.4)");
  assert.equal(state.runs, 1);
});

Deno.test("ACP §6.4: a key in flight is a 409 idempotency_in_flight with Retry-After; the client's retry gets the replay", async () => {
  const { state, server } = merchant();
  await using _ = server;
  const post = acpClient(server.url, "agent_codes");
  const key = crypto.randomUUID();
  const release = deferred();
  state.hold = release.promise;
  const first = post("/checkout_sessions", ITEMS, { key });
  await state.entered.promise;
  const told: number[] = [];
  const duplicate = await post("/checkout_sessions", ITEMS, {
    key,
    retries: 1,
    // Honours Retry-After by waiting for the first to finish, not a clock.
    wait: async (seconds) => {
      told.push(seconds);
      release.resolve();
      await first;
    },
  });
  assert.equal(told.length, 1, "one 409 before the replay");
  assert.ok(Number.isInteger(told[0]) && told[0]! >= 1, `${told[0]}`);
  assert.equal(duplicate.status, 201);
  assert.equal(duplicate.replayed, true);
  assert.deepEqual(duplicate.body, (await first).body);
  assert.equal(state.runs, 1);

  // Without a retry, the 409 itself, as §6.4 shows it.
  const again = deferred();
  state.hold = again.promise;
  state.entered = deferred();
  const other = crypto.randomUUID();
  const running = post("/checkout_sessions", ITEMS, { key: other });
  await state.entered.promise;
  const busy = await post("/checkout_sessions", ITEMS, { key: other });
  assert.equal(busy.status, 409);
  assert.deepEqual(
    [busy.body.type, busy.body.code],
    ["invalid_request", "idempotency_in_flight"],
  );
  assert.equal(busy.retryAfter, "1");
  again.resolve();
  assert.equal((await running).status, 201);
});

Deno.test("ACP §6.1: one key on two endpoints, or from two callers, is independent", async () => {
  const { state, server } = merchant();
  await using _ = server;
  const key = crypto.randomUUID();
  const alice = acpClient(server.url, "agent_alice_codes");
  const bob = acpClient(server.url, "agent_bob_codes");
  const created = await alice("/checkout_sessions", ITEMS, { key });
  assert.equal(created.status, 201);
  const completed = await alice("/checkout_sessions/cs_1/complete", {}, {
    key,
  });
  assert.equal(completed.status, 200, "another endpoint, not a 422");
  assert.equal(completed.replayed, false);
  const theirs = await bob("/checkout_sessions", ITEMS, { key });
  assert.equal(theirs.status, 201, "another caller, not a replay");
  assert.equal(theirs.replayed, false);
  assert.equal(state.runs, 3);
});

Deno.test("ACP §6.5: a 5xx is not replayed (the retry runs afresh), a 4xx is", async () => {
  const { state, server } = merchant();
  await using _ = server;
  const post = acpClient(server.url, "agent_codes");
  const path = "/checkout_sessions/cs_1/complete";
  const key = crypto.randomUUID();
  state.next.push("psp_down");
  const down = await post(path, { payment_data: {} }, { key });
  assert.equal(down.status, 500);
  const retried = await post(path, { payment_data: {} }, { key });
  assert.equal(retried.status, 200, "processed as a fresh request");
  assert.equal(retried.replayed, false);
  assert.equal(state.runs, 2);

  const other = crypto.randomUUID();
  state.next.push("requires_3ds");
  const refused = await post(path, { payment_data: {} }, { key: other });
  assert.equal(refused.status, 400);
  assert.equal(refused.body.code, "requires_3ds");
  const replay = await post(path, { payment_data: {} }, { key: other });
  assert.equal(replay.status, 400, "the original 4xx");
  assert.equal(replay.replayed, true);
  assert.deepEqual(replay.body, refused.body);
  assert.equal(state.runs, 3);
});

Deno.test("ACP §6.6: keys are kept 24 hours at least; a ttl below is a RangeError", async () => {
  const claims: number[] = [];
  const store = new MemoryStore();
  const claim = store.claim.bind(store);
  store.claim = (slot, options) => {
    claims.push(options.ttlMs);
    return claim(slot, options);
  };
  const { server } = merchant(store);
  await using _ = server;
  const post = acpClient(server.url, "agent_codes");
  assert.equal((await post("/checkout_sessions", ITEMS)).status, 201);
  assert.deepEqual(claims, [ACP_MIN_TTL]);
  assert.equal(ACP_MIN_TTL, 24 * 60 * 60 * 1000);

  const scope = "global";
  assert.throws(() => acpProblems({ scope, ttl: ACP_MIN_TTL - 1 }), {
    name: "RangeError",
    message:
      "'ttl' must be at least 86400000 milliseconds (24 hours, ACP §6.6): current value is 86399999",
  });
  assert.equal(acpProblems({ scope, ttl: ACP_MIN_TTL }).ttl, ACP_MIN_TTL);
  assert.equal(acpProblems({ scope }).ttl, ACP_MIN_TTL);
  assert.equal(acpProblems({ scope, ttl: ACP_MIN_TTL + 1 }).ttl, 86_400_001);
  assert.throws(() => acpProblems({ scope, ttl: 1.5e8 + 0.5 }), RangeError);
  const notScope = { scope: 7 } as unknown as Parameters<typeof acpProblems>[0];
  assert.throws(() => acpProblems(notScope), {
    name: "TypeError",
    message: `'scope' must be a function or "global": current value is 7`,
  });
});

Deno.test("acpProblems(): the middleware's own 503 and 500 are service_unavailable and processing_error", async () => {
  const failing = new MemoryStore();
  failing.claim = () => Promise.reject(new Error("down"));
  for (
    const [store, status, type, code] of [
      [failing, 503, "service_unavailable", "idempotency_unavailable"],
      [
        new UnreadableStore(),
        500,
        "processing_error",
        "idempotency_record_unreadable",
      ],
    ] as const
  ) {
    const { state, server } = merchant(store);
    await using _ = server;
    const answer = await acpClient(server.url, "agent_codes")(
      "/checkout_sessions",
      ITEMS,
    );
    assert.equal(answer.status, status);
    assert.deepEqual([answer.body.type, answer.body.code], [type, code]);
    assert.equal(answer.retryAfter, status === 503 ? "1" : null);
    assert.equal(state.runs, 0);
  }
});

Deno.test('acpProblems(): a scope function that returns "" is refused as the middleware refuses it', async () => {
  const handler = idempotency(() => new Response("ran"), {
    logger: false,
    ...acpProblems({ scope: () => "" }),
  });
  const request = new Request("http://api.test/checkout_sessions", {
    method: "POST",
    headers: { "idempotency-key": "k1" },
    body: "{}",
  });
  await assert.rejects(Promise.resolve(handler(request)), /scope/);
});

Deno.test("acpProblems(): the scope is one-to-one over (caller, path): two requests share keys only with both equal", async () => {
  const segment = fc.stringMatching(/^[a-z0-9_]{1,6}$/);
  const path = fc.array(segment, { minLength: 1, maxLength: 3 }).map((s) =>
    `/${s.join("/")}`
  );
  const caller = fc.string({ minLength: 1, maxLength: 8 });
  await fc.assert(
    fc.asyncProperty(caller, path, caller, path, async (a, p, b, q) => {
      const { scope } = acpProblems({
        scope: (request) => request.headers.get("x-caller")!,
      });
      const of = (id: string, at: string) =>
        scope(
          new Request(`http://api.test${at}`, { headers: { "x-caller": id } }),
        );
      const same = (await of(a, p)) === (await of(b, q));
      return same === (a === b && p === q);
    }),
    { numRuns: 300 },
  );
  // The pair a plain concatenation would confuse: "a/b" + "/c", "a" + "/b/c".
  const { scope } = acpProblems({
    scope: (request) => request.headers.get("x-caller")!,
  });
  const of = (id: string, at: string) =>
    scope(new Request(`http://api.test${at}`, { headers: { "x-caller": id } }));
  assert.notEqual(await of("a/b", "/c"), await of("a", "/b/c"));
});
