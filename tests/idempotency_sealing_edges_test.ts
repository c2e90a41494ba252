// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Sealed records at their edges: keys checked at `idempotency()`, naming
 * what is wrong; a handler's own `Idempotent-Sealed` header never stored; a
 * sealed record whose body MemoryStore drops; a forged fingerprint or a body
 * from another record answering 500 unreadable; a record that cannot be
 * sealed never written. Sealing on every store is in
 * `idempotency_sealing_test.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { idempotency, slotOf } from "../mod.ts";
import type { IdempotencyOptions } from "../src/options.ts";
import type {
  IdempotencyStore,
  StoredResponse,
  UnitOfWork,
} from "../src/store.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { post } from "./_support/http.ts";
import { pattern } from "./_support/bytes.ts";
import { recorder } from "./_support/stores.ts";
import {
  aesKey,
  assertUnreadable,
  BODY,
  HEADERS,
  Held,
  NEW,
  OLD,
  sealed,
  snapshot,
} from "./_sealing_fixtures.ts";

Deno.test("encryption: keys are checked at idempotency(), naming what is wrong", async () => {
  const make = (encryption: unknown) => () =>
    idempotency(() => new Response(), {
      scope: "global",
      encryption: encryption as NonNullable<IdempotencyOptions["encryption"]>,
    });
  assert.throws(make({ keys: [] }), TypeError, "'encryption.keys'");
  assert.throws(make(null), TypeError, "'encryption.keys'");
  assert.throws(
    make({ keys: [{ id: "", key: OLD.key }] }),
    TypeError,
    "'encryption.keys[0].id'",
  );
  assert.throws(
    make({ keys: [{ id: "a;b", key: OLD.key }] }),
    TypeError,
    "visible ASCII",
  );
  assert.throws(
    make({ keys: [{ id: "x".repeat(33), key: OLD.key }] }),
    TypeError,
  );
  assert.throws(
    make({ keys: [OLD, { ...NEW, id: OLD.id }] }),
    TypeError,
    "repeats",
  );
  // A raw key passed by mistake is named by its type, never printed.
  const raw = "raw-key-material-0123456789abcdef";
  for (
    const [key, type] of [[raw, "String"], [new Uint8Array(32), "Uint8Array"]]
  ) {
    assert.throws(
      make({ keys: [{ id: "k", key }] }),
      (error: Error) =>
        error instanceof TypeError &&
        error.message.includes("must be a CryptoKey (importEncryptionKeys(") &&
        error.message.endsWith(`: current type is ${type}`) &&
        !error.message.includes(raw) && !error.message.includes("0,0"),
    );
  }
  assert.throws(
    make({ keys: [{ id: "k", key: await aesKey(128) }] }),
    RangeError,
    "256 bits",
  );
  assert.throws(
    make({ keys: [OLD, { id: "k", key: await aesKey(256, ["encrypt"]) }] }),
    TypeError,
    "'encryption.keys[1].key' must allow",
  );
  const hmac = await crypto.subtle.generateKey(
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  assert.throws(make({ keys: [{ id: "k", key: hmac }] }), TypeError, "AES-GCM");
  make({ keys: [OLD, NEW] })();
});

Deno.test("idempotency() never stores a handler's own Idempotent-Sealed header: its record replays in clear", async () => {
  let runs = 0;
  const handler = idempotency(() => {
    runs++;
    return new Response("paid", {
      status: 201,
      headers: { "idempotent-sealed": "1;k1", "x-a": "1" },
    });
  }, { store: new MemoryStore(), scope: "global" });
  const first = await handler(post("sealed-name", "{}"));
  assert.equal(first.headers.get("idempotent-sealed"), "1;k1");
  await first.body?.cancel();
  const replay = await handler(post("sealed-name", "{}"));
  assert.equal(replay.status, 201);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.headers.get("idempotent-sealed"), null);
  assert.equal(
    replay.headers.get("idempotent-omitted-headers"),
    "idempotent-sealed",
  );
  assert.equal(await replay.text(), "paid");
  assert.equal(runs, 1);
});

Deno.test("a sealed record whose body MemoryStore drops under byte pressure replays its status and headers, as one in clear does", async () => {
  const replays = [];
  for (const extra of [{}, { encryption: { keys: [OLD] } }]) {
    const store = new MemoryStore({ maxBytes: 3000 });
    let runs = 0;
    const guarded = (ttl: number) =>
      idempotency(() => {
        runs++;
        return new Response(pattern(1500, 3), {
          status: 201,
          headers: HEADERS,
        });
      }, { scope: "global", store, ttl, ...extra });
    // The second record's body pushes out the first's, nearer its expiry.
    await (await guarded(60_000)(post("pressed"))).arrayBuffer();
    await (await guarded(120_000)(post("pushing"))).arrayBuffer();
    const replay = await guarded(60_000)(post("pressed"));
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    // The store's own reason: not the middleware's, which the seal binds.
    assert.equal(
      replay.headers.get("idempotent-body-omitted"),
      "store_dropped",
    );
    replays.push(await snapshot(replay));
    assert.equal(runs, 2);
  }
  assert.equal(replays[1]!.status, 201);
  assert.deepEqual(replays[1], replays[0]);
});

/** A fresh store holding `response` at the slot of `key` under `fingerprint`, as someone without the key could write it. */
async function forged(
  key: string,
  fingerprint: string,
  response: StoredResponse,
): Promise<MemoryStore> {
  const store = new MemoryStore();
  const options = { fingerprint, leaseMs: 10_000, ttlMs: 600_000 };
  const claim = await store.claim(slotOf("", key), options);
  assert(claim.state === "acquired");
  await store.complete(slotOf("", key), claim.token, response);
  return store;
}

Deno.test("a sealed record whose stored fingerprint is changed, or whose body is another record's of its slot, answers 500 unreadable, not a replay", async () => {
  const completed = async (store: IdempotencyStore, key: string) => {
    const options = { fingerprint: "any", leaseMs: 10_000, ttlMs: 600_000 };
    const found = await store.claim(slotOf("", key), options);
    assert(found.state === "completed");
    return found;
  };
  const store = new MemoryStore();
  const { handler } = sealed([OLD], store);
  await (await handler(post("paid", '{"amount":100}'))).arrayBuffer();
  await (await handler(post("other"))).arrayBuffer(); // body "{}"
  const paid = await completed(store, "paid");
  const other = await completed(store, "other");
  // Another run of the same request, its answer another body.
  const elsewhere = new MemoryStore();
  const v2 = idempotency(
    () => new Response("v2", { status: 201, headers: HEADERS }),
    {
      scope: "global",
      store: elsewhere,
      encryption: { keys: [OLD] },
    },
  );
  await (await v2(post("paid", '{"amount":100}'))).arrayBuffer();
  const spliced = {
    ...paid.response,
    body: (await completed(elsewhere, "paid")).response.body,
  };
  const events: string[] = [];
  // A body "{}" now has the stored fingerprint: it must not replay.
  const moved = sealed(
    [OLD],
    await forged("paid", other.fingerprint, paid.response),
    events,
  );
  await assertUnreadable(moved.handler, "paid", events);
  const mixed = sealed(
    [OLD],
    await forged("paid", paid.fingerprint, spliced),
    events,
  );
  events.length = 0;
  const answer = await mixed.handler(post("paid", '{"amount":100}'));
  assert.equal(answer.status, 500);
  await answer.body?.cancel();
  assert.deepEqual(events, ["conflict:true"]);
  assert.equal(moved.runs() + mixed.runs(), 0);
});

/** A key that passes every check but that `encrypt` refuses: sealing throws. */
const BROKEN: CryptoKey = Object.create(CryptoKey.prototype, {
  type: { value: "secret" },
  algorithm: { value: { name: "AES-GCM", length: 256 } },
  usages: { value: ["encrypt", "decrypt"] },
});

/** A MemoryStore whose every claim opens a transaction, its calls recorded. */
class Transactional extends Held {
  calls: string[] = [];
  unitOfWork(): UnitOfWork {
    const { calls } = this;
    return {
      opened: true,
      commit: () => (calls.push("commit"), Promise.resolve("committed")),
      rollback: () => (calls.push("rollback"), Promise.resolve()),
    };
  }
}

Deno.test("a record that cannot be sealed is not written, never resealed: in a transaction, rolled back (503, the slot released); else the response goes out, the slot left in flight", async (t) => {
  for (const transactional of [false, true]) {
    await t.step(
      transactional ? "in a transaction" : "with complete",
      async () => {
        const store = transactional
          ? new Transactional(new MemoryStore())
          : new Held(new MemoryStore());
        const { onEvent, types } = recorder();
        let runs = 0;
        const handler = idempotency(() => {
          runs++;
          return new Response(BODY, { status: 201, headers: HEADERS });
        }, {
          scope: "global",
          store,
          onEvent,
          encryption: { keys: [{ id: "k", key: BROKEN }] },
        });
        const first = await handler(post("broken"));
        assert.equal(first.status, transactional ? 503 : 201);
        await first.body?.cancel();
        const settled = transactional ? "released" : "completed";
        assert.deepEqual(types(), ["claimed", "store_error", settled]);
        assert.deepEqual(store.held, []);
        const retry = await handler(post("broken"));
        await retry.body?.cancel();
        if (store instanceof Transactional) {
          assert.deepEqual(store.calls, ["rollback", "rollback"]);
          assert.equal(runs, 2);
        } else {
          assert.equal(retry.status, 409);
          assert.equal(runs, 1);
        }
      },
    );
  }
});
