// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MemoryStore over random interleavings (fast-check): it agrees with a
 * reference model of the store contract, and evicts as its policy says when
 * it is held at its bound. The rest of MemoryStore is in `memory_test.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { MemoryStore } from "../../src/stores/memory.ts";
import { StoreError } from "../../src/store.ts";
import type { ClaimResult } from "../../src/store.ts";
import { options, record } from "./_memory_fixtures.ts";

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

// Few distinct durations, so that time often lands exactly on a lease or TTL edge.
/** Writes a claim the store granted into the model and the tokens seen. */
function acquired(
  model: Map<number, ModelEntry>,
  tokens: string[],
  command: Extract<Command, { op: "claim" }>,
  fp: string,
  token: string,
  now: number,
): void {
  tokens.push(token);
  model.set(command.slot, {
    state: "in_flight",
    fp,
    token,
    leaseUntil: now + command.lease,
    deadline: now + command.ttl,
  });
}

/**
 * Runs a write command (complete, release, extend) with one of the tokens
 * ever handed out, on the store and on the model, and asserts that it is
 * applied exactly when the model says the token owns the slot (`entry` is
 * the slot's live model entry, if any).
 */
async function write(
  store: MemoryStore,
  model: Map<number, ModelEntry>,
  tokens: string[],
  command: Exclude<Command, { op: "claim" | "advance" }>,
  at: { entry: ModelEntry | undefined; now: number; message: string },
): Promise<void> {
  const { entry, now } = at;
  const slot = `s${command.slot}`;
  const token = tokens.length ? tokens[command.which % tokens.length]! : "none";
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
      entry.leaseUntil = now + command.lease;
    }
  }
  assert.equal(outcome, owns ? "applied" : "lost", at.message);
}

const msArb = fc.constantFrom(1, 5, 10, 20, 50);
function commandsOver(slots: number): fc.Arbitrary<Command> {
  const slotArb = fc.integer({ min: 0, max: slots - 1 });
  return fc.oneof(
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
}
const commandArb = commandsOver(4);

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
              acquired(model, tokens, command, fp, got.token, now);
            }
            continue;
          }
          await write(store, model, tokens, command, {
            entry,
            now,
            message: `${command.op} on ${slot}`,
          });
        }
      },
    ),
    { numRuns: 500 },
  );
});

// The eviction policy as a model: the store is nearly always full, so most
// claims evict. Each command runs at its own fraction
// of a millisecond, so no two deadlines or lease ends ever tie and the
// record to evict is always one.
Deno.test("MemoryStore evicts as its policy says over random interleavings at its bound", async () => {
  await fc.assert(
    fc.asyncProperty(
      // 3 records of 5 slots; or 12 of 24, so that the heaps run deep.
      fc.constantFrom(3, 12).chain((max) =>
        fc.tuple(
          fc.constant(max),
          fc.array(commandsOver(max * 5 / 3 | 0), {
            minLength: 40,
            maxLength: 160,
          }),
        )
      ),
      async ([max, commands]) => {
        let now = 0;
        const store = new MemoryStore({ maxEntries: max, clock: () => now });
        const model = new Map<number, ModelEntry>();
        const tokens: string[] = [];
        const claimEnd = (e: ModelEntry & { state: "in_flight" }) =>
          Math.min(e.leaseUntil, e.deadline);
        const evict = (): boolean => {
          let victim: number | undefined;
          let key = Infinity;
          for (const [slot, e] of model) {
            if (
              e.state === "in_flight" && claimEnd(e) <= now && claimEnd(e) < key
            ) {
              [victim, key] = [slot, claimEnd(e)];
            }
          }
          if (victim === undefined) {
            for (const [slot, e] of model) {
              if (e.state === "completed" && e.deadline < key) {
                [victim, key] = [slot, e.deadline];
              }
            }
          }
          if (victim === undefined) return false;
          model.delete(victim);
          return true;
        };
        for (const [i, command] of commands.entries()) {
          now = Math.floor(now) + i / 1_024; // a fraction of its own
          if (command.op === "advance") {
            now += command.ms;
            continue;
          }
          const slot = `s${command.slot}`;
          let entry = model.get(command.slot);
          // The store drops an expired record when a claim meets it; until
          // then it holds its room, and only its owner's writes are lost.
          const expired = entry !== undefined && entry.deadline <= now;
          if (expired && command.op === "claim") {
            model.delete(command.slot);
            entry = undefined;
          }
          if (command.op === "claim") {
            const fp = `f${command.fp}`;
            const claim = store.claim(slot, {
              fingerprint: fp,
              leaseMs: command.lease,
              ttlMs: command.ttl,
            });
            if (entry?.state === "completed") {
              assert.equal((await claim).state, "completed", slot);
            } else if (entry && entry.leaseUntil > now) {
              assert.equal((await claim).state, "in_flight", slot);
            } else if (!entry && model.size >= max && !evict()) {
              await assert.rejects(() => claim, StoreError);
            } else {
              if (entry) model.delete(command.slot);
              const got = await claim;
              assert.equal(got.state, "acquired", slot);
              if (got.state !== "acquired") return;
              assert.equal(got.recovered, entry !== undefined);
              acquired(model, tokens, command, fp, got.token, now);
            }
            assert.equal(store.size <= max, true);
            continue;
          }
          await write(store, model, tokens, command, {
            entry: expired ? undefined : entry,
            now,
            message: `${command.op} ${slot}`,
          });
        }
        // Every record the model holds is there, and nothing else.
        for (const [slot, e] of model) {
          if (e.deadline <= now) model.delete(slot);
        }
        for (const [slot, e] of model) {
          if (e.state === "in_flight" && e.leaseUntil <= now) continue;
          const got = await store.claim(`s${slot}`, options);
          assert.equal(
            got.state,
            e.state === "completed" ? "completed" : "in_flight",
          );
        }
      },
    ),
    { numRuns: 500 },
  );
});
