// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The conformance suite itself (`src/testing/testing.ts`): its cases have unique
 * names and run in their table's order, `only` runs the named cases alone,
 * a case is skipped when the harness lacks what it needs, and a name that
 * is no case's is refused before the store is set up.
 *
 * @module
 */
import assert from "node:assert/strict";
import { MemoryStore } from "../../src/stores/memory.ts";
import {
  checkStoreConformance,
  type ConformanceCheck,
  storeConformance,
} from "../../src/testing/testing.ts";
import { HAS } from "../../src/testing/_context.ts";
import { CLAIM_CASES } from "../../src/testing/_claims.ts";
import { EDGE_CASES } from "../../src/testing/_edges.ts";
import { ADMIN_CASES } from "../../src/testing/_admin.ts";
import type { IdempotencyStore } from "../../src/store.ts";

const CASES = [...CLAIM_CASES, ...EDGE_CASES, ...ADMIN_CASES];
const TTL_EDGE = "a record whose TTL ends exactly now is absent (rule 5)";

/** A MemoryStore on a clock that moves only when the suite moves it. */
function memory(withClock: boolean): ConformanceCheck["setup"] {
  return () => {
    let now = 0;
    const move = (ms: number) => Promise.resolve(void (now += ms));
    return Promise.resolve({
      store: new MemoryStore({ clock: () => now }),
      elapse: move,
      ...(withClock ? { advanceClock: move } : {}),
    });
  };
}

/** The names of the cases a check runs, in order. */
async function ran(check: ConformanceCheck): Promise<string[]> {
  const names: string[] = [];
  await checkStoreConformance({
    ...check,
    step: (name, fn) => {
      names.push(name);
      return fn();
    },
  });
  return names;
}

storeConformance({
  name: `MemoryStore, only "${TTL_EDGE}",`,
  only: [TTL_EDGE],
  setup: memory(true),
});

Deno.test("the conformance cases have unique names and run in their table's order", async () => {
  const names = CASES.map((c) => c.name);
  assert.equal(new Set(names).size, names.length);
  const harness = await memory(true)();
  const runnable = CASES.filter((c) =>
    (c.needs ?? []).every((n) => HAS[n](harness))
  );
  assert.deepEqual(
    await ran({ setup: memory(true) }),
    runnable.map((c) => c.name),
  );
});

Deno.test("checkStoreConformance with only runs the named cases alone, in the table's order", async () => {
  const [first, second] = [CASES[1]!.name, CASES[0]!.name];
  assert.deepEqual(await ran({ only: [TTL_EDGE], setup: memory(true) }), [
    TTL_EDGE,
  ]);
  assert.deepEqual(
    await ran({ only: [first, second], setup: memory(true) }),
    [second, first],
  );
});

Deno.test("checkStoreConformance skips a case whose needs the harness lacks", async () => {
  assert.deepEqual(await ran({ only: [TTL_EDGE], setup: memory(false) }), []);
  const names = await ran({ setup: memory(false) });
  const harness = await memory(false)();
  for (const c of CASES) {
    const met = (c.needs ?? []).every((n) => HAS[n](harness));
    assert.equal(names.includes(c.name), met, c.name);
  }
});

Deno.test("checkStoreConformance shows each case it skips for a store without peek, forget or stats", async () => {
  let now = 0;
  const memory = new MemoryStore({ clock: () => now });
  const store: IdempotencyStore = {
    claim: (slot, options) => memory.claim(slot, options),
    complete: (slot, token, response) => memory.complete(slot, token, response),
    release: (slot, token) => memory.release(slot, token),
    extend: (slot, token, ms) => memory.extend(slot, token, ms),
  };
  const elapse = (ms: number) => Promise.resolve(void (now += ms));
  const names = await ran({ setup: () => Promise.resolve({ store, elapse }) });
  for (const c of ADMIN_CASES) {
    assert.ok(
      names.some((name) =>
        name.startsWith(`${c.name} (skipped: the store has no `)
      ),
      c.name,
    );
    assert.ok(!names.includes(c.name), c.name);
  }
});

Deno.test("checkStoreConformance refuses a name that is no case's, before setup", async () => {
  let setups = 0;
  await assert.rejects(
    checkStoreConformance({
      only: [`${TTL_EDGE}.`],
      setup: () => {
        setups++;
        return memory(true)();
      },
    }),
    TypeError,
  );
  assert.equal(setups, 0);
});
