// Copyright 2026 the @idempotent/http authors. MIT license.
import assert from "node:assert/strict";
import fc from "fast-check";
import { MemoryStore } from "../src/stores/memory.ts";
import { StoreError } from "../src/store.ts";
import type { ClaimResult, StoredResponse } from "../src/store.ts";
import { storeConformance } from "../src/testing.ts";

storeConformance({
  name: "MemoryStore",
  setup() {
    let now = 1_000_000;
    const store = new MemoryStore({ maxEntries: 100_000, clock: () => now });
    return Promise.resolve({
      store,
      elapse(ms: number) {
        now += ms;
        return Promise.resolve();
      },
      advanceClock(ms: number) {
        now += ms;
        return Promise.resolve();
      },
    });
  },
});

const options = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 10_000 };
const record = (n: number): StoredResponse => ({
  status: 200,
  headers: [],
  body: new Uint8Array(n),
});

async function completeNew(
  store: MemoryStore,
  slot: string,
  body = 10,
  ttlMs = options.ttlMs,
) {
  const claim = await store.claim(slot, { ...options, ttlMs });
  assert.equal(claim.state, "acquired");
  if (claim.state !== "acquired") throw new Error("unreachable");
  assert.equal(
    await store.complete(slot, claim.token, record(body)),
    "applied",
  );
}

Deno.test("MemoryStore evicts the completed record nearest its expiry first", async () => {
  let now = 0;
  const store = new MemoryStore({ maxEntries: 3, clock: () => now });
  await completeNew(store, "late", 10, 9_000);
  await completeNew(store, "early", 10, 2_000);
  await completeNew(store, "middle", 10, 5_000);
  now += 1;
  await completeNew(store, "new");
  assert.equal(store.size, 3);
  assert.equal((await store.claim("late", options)).state, "completed");
  assert.equal((await store.claim("middle", options)).state, "completed");
  assert.equal((await store.claim("early", options)).state, "acquired");
});

Deno.test("MemoryStore never evicts a live claim and refuses a claim when all are live", async () => {
  let now = 0;
  const store = new MemoryStore({ maxEntries: 2, clock: () => now });
  const a = await store.claim("a", options);
  await store.claim("b", options);
  await assert.rejects(() => store.claim("c", options), StoreError);
  assert.equal((await store.claim("a", options)).state, "in_flight");
  assert.equal((await store.claim("b", options)).state, "in_flight");
  // Once a lease runs out, its claim is no longer live and makes room.
  now += options.leaseMs;
  assert.equal((await store.claim("c", options)).state, "acquired");
  if (a.state === "acquired") {
    assert.equal(await store.complete("a", a.token, record(1)), "lost");
  }
});

Deno.test("MemoryStore keeps its bytes under maxBytes by dropping the oldest bodies, not the records", async () => {
  let now = 0;
  const store = new MemoryStore({ maxBytes: 1_000, clock: () => now });
  for (let i = 0; i < 20; i++) {
    now++; // each record expires a little after the one before
    await completeNew(store, `s${i}`, 300);
    assert.ok(store.bytes <= 1_000, `bytes ${store.bytes}`);
  }
  assert.equal(store.size, 20, "every record is kept");
  for (let i = 0; i < 20; i++) {
    const replay = await store.claim(`s${i}`, options);
    assert.equal(replay.state, "completed", `s${i} still replays`);
    if (replay.state !== "completed") continue;
    if (i >= 17) {
      assert.equal(
        replay.response.body?.byteLength,
        300,
        `s${i} keeps its body`,
      );
    } else {assert.deepEqual([replay.response.body, replay.response.omitted], [
        null,
        "too_large",
      ]);}
  }
});

Deno.test("MemoryStore keeps a record larger than maxBytes with its body omitted", async () => {
  const store = new MemoryStore({ maxBytes: 100 });
  await completeNew(store, "big", 500);
  const replay = await store.claim("big", options);
  assert.equal(replay.state, "completed");
  if (replay.state === "completed") {
    assert.equal(replay.response.body, null);
    assert.equal(replay.response.omitted, "too_large");
  }
});

Deno.test("MemoryStore drops expired records as it meets them", async () => {
  let now = 0;
  const store = new MemoryStore({ maxEntries: 2, clock: () => now });
  await completeNew(store, "a");
  await completeNew(store, "b");
  now += options.ttlMs;
  await completeNew(store, "c");
  await completeNew(store, "d");
  assert.equal(store.size, 2);
});

Deno.test("MemoryStore validates its options and arguments", async () => {
  assert.throws(() => new MemoryStore({ maxEntries: 0 }), RangeError);
  assert.throws(() => new MemoryStore({ maxBytes: -1 }), RangeError);
  assert.throws(
    () => new MemoryStore({ maxEntries: 1.5 }),
    /'maxEntries' must be a positive integer: current value is 1.5/,
  );
  const store = new MemoryStore();
  await assert.rejects(
    () => store.claim("s", { ...options, leaseMs: 0 }),
    RangeError,
  );
  await assert.rejects(
    () => store.claim("s", { ...options, ttlMs: NaN }),
    RangeError,
  );
  const claim = await store.claim("s", options);
  if (claim.state !== "acquired") throw new Error("unreachable");
  await assert.rejects(
    () =>
      store.complete("s", claim.token, {
        status: 200,
        headers: [],
        body: null,
      }),
    TypeError,
  );
  await assert.rejects(
    () =>
      store.complete("s", claim.token, {
        status: 99,
        headers: [],
        body: null,
        omitted: "too_large",
      }),
    TypeError,
  );
});

// The model: what the contract says, written as plainly as possible.
type ModelEntry =
  | {
    state: "in_flight";
    fp: string;
    token: string;
    leaseUntil: number;
    deadline: number;
  }
  | { state: "completed"; fp: string; body: number; deadline: number };

type Command =
  | { op: "claim"; slot: number; fp: number; lease: number; ttl: number }
  | { op: "complete"; slot: number; which: number; body: number }
  | { op: "release"; slot: number; which: number }
  | { op: "extend"; slot: number; which: number; lease: number }
  | { op: "advance"; ms: number };

const slotArb = fc.integer({ min: 0, max: 3 });
// Few distinct durations, so that time often lands exactly on a lease or TTL edge.
const msArb = fc.constantFrom(1, 5, 10, 20, 50);
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc.record({
    op: fc.constant("claim" as const),
    slot: slotArb,
    fp: fc.integer({ min: 0, max: 2 }),
    lease: msArb,
    ttl: fc.oneof(msArb, fc.constant(200)),
  }),
  fc.record({
    op: fc.constant("complete" as const),
    slot: slotArb,
    which: fc.nat(),
    body: fc.integer({ min: 0, max: 5 }),
  }),
  fc.record({
    op: fc.constant("release" as const),
    slot: slotArb,
    which: fc.nat(),
  }),
  fc.record({
    op: fc.constant("extend" as const),
    slot: slotArb,
    which: fc.nat(),
    lease: msArb,
  }),
  fc.record({
    op: fc.constant("advance" as const),
    ms: fc.oneof(msArb, fc.constant(0)),
  }),
);

Deno.test("MemoryStore agrees with a reference model over random interleavings", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(commandArb, { maxLength: 60 }),
      async (commands) => {
        let now = 0;
        const store = new MemoryStore({ clock: () => now });
        const model = new Map<number, ModelEntry>();
        const tokens: string[] = []; // every token ever handed out, stale ones included
        for (const command of commands) {
          if (command.op === "advance") {
            now += command.ms;
            continue;
          }
          const slot = `s${command.slot}`;
          let entry = model.get(command.slot);
          if (entry && entry.deadline <= now) {
            model.delete(command.slot);
            entry = undefined;
          }
          if (command.op === "claim") {
            const fp = `f${command.fp}`;
            const got: ClaimResult = await store.claim(slot, {
              fingerprint: fp,
              leaseMs: command.lease,
              ttlMs: command.ttl,
            });
            if (entry?.state === "completed") {
              assert.equal(got.state, "completed");
              if (got.state === "completed") {
                assert.equal(got.fingerprint, entry.fp);
                assert.equal(got.response.body?.byteLength, entry.body);
              }
            } else if (entry && entry.leaseUntil > now) {
              assert.deepEqual(got, {
                state: "in_flight",
                fingerprint: entry.fp,
                retryAfterMs: entry.leaseUntil - now,
              });
            } else {
              assert.equal(got.state, "acquired");
              if (got.state !== "acquired") return;
              assert.equal(got.recovered, entry !== undefined);
              assert.ok(!tokens.includes(got.token), "tokens are never reused");
              tokens.push(got.token);
              model.set(command.slot, {
                state: "in_flight",
                fp,
                token: got.token,
                leaseUntil: now + command.lease,
                deadline: now + command.ttl,
              });
            }
            continue;
          }
          const token = tokens.length
            ? tokens[command.which % tokens.length]!
            : "none";
          const owns = entry?.state === "in_flight" && entry.token === token;
          let outcome;
          if (command.op === "complete") {
            outcome = await store.complete(slot, token, record(command.body));
            if (owns) {
              model.set(command.slot, {
                state: "completed",
                fp: entry!.fp,
                body: command.body,
                deadline: entry!.deadline,
              });
            }
          } else if (command.op === "release") {
            outcome = await store.release(slot, token);
            if (owns) model.delete(command.slot);
          } else {
            outcome = await store.extend(slot, token, command.lease);
            if (owns && entry?.state === "in_flight") {
              entry.leaseUntil = now +
                command.lease;
            }
          }
          assert.equal(
            outcome,
            owns ? "applied" : "lost",
            `${command.op} on ${slot}`,
          );
        }
      },
    ),
    { numRuns: 500 },
  );
});
