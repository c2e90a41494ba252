// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The store contract of `IdempotencyStore` as one suite, the cases this
 * package runs against each of its stores (docs/architecture.md, Store
 * contract). {@linkcode storeConformance} registers one `Deno.test` per
 * store, one step per case; {@linkcode checkStoreConformance} runs them for
 * another runner. Each case uses slots of its own, `only: [name]` runs one
 * alone, and a case that needs what the harness lacks (`advanceClock`,
 * `poison`, the store's `waitForChange`) is skipped; a store without the
 * optional `peek`, `forget` or `stats` gets a step named "… (skipped: the
 * store has no peek())" for each case it skips.
 *
 * @module
 */

import {
  CaseContext,
  type ConformanceCheck,
  type ConformanceOptions,
  HAS,
  SHOWN_NEEDS,
} from "./_context.ts";
import { CLAIM_CASES } from "./_claims.ts";
import { EDGE_CASES } from "./_edges.ts";
import { ADMIN_CASES } from "./_admin.ts";

export type {
  ConformanceCheck,
  ConformanceHarness,
  ConformanceOptions,
  ConformanceStep,
  PoisonKind,
} from "./_context.ts";

const CASES = [...CLAIM_CASES, ...EDGE_CASES, ...ADMIN_CASES];

/**
 * Registers the conformance suite for one store as a Deno test, one step per
 * case. Call it at the top level of a test file (so `deno test --doc` cannot
 * run this example; {@linkcode checkStoreConformance}'s runs the same cases).
 *
 * @example Register the suite in my_store_test.ts
 * ```ts ignore
 * import { storeConformance } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 *
 * const elapse = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));
 * storeConformance({ name: "MemoryStore", setup: async () => ({ store: new MemoryStore(), elapse }) });
 * ```
 */
export function storeConformance(options: ConformanceOptions): void {
  const { name, ignore = false, ...check } = options;
  Deno.test({
    name: ignore
      ? `${name} conforms to the store contract (ignored: ${ignore})`
      : `${name} conforms to the store contract`,
    ignore: ignore !== false,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: (t) =>
      checkStoreConformance({ ...check, step: (name, fn) => t.step(name, fn) }),
  });
}

/**
 * Runs the conformance suite against one store without registering a test:
 * sets the store up, runs every case (or those `only` names) that the
 * harness can run, and tears it down. A name in `only` that is no case's is
 * a `TypeError`, before setup; a failing case rejects (under the default
 * `step`) with an `Error` naming it, its assertion as `cause`.
 *
 * @example A store that lets a stale owner release fails
 * ```ts
 * import { checkStoreConformance } from "@idempotent/http/testing";
 * import { MemoryStore } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * let now = 0;
 * const broken = new MemoryStore({ clock: () => now });
 * broken.release = () => Promise.resolve("applied"); // never checks the token
 * const elapse = async (ms: number) => void (now += ms);
 * const check = checkStoreConformance({ setup: async () => ({ store: broken, elapse }) });
 * await assert.rejects(check, /Store conformance case failed/);
 * ```
 */
export async function checkStoreConformance(
  options: ConformanceCheck,
): Promise<void> {
  const only = options.only && new Set(options.only);
  for (const name of only ?? []) {
    if (!CASES.some((c) => c.name === name)) {
      throw new TypeError(`No store conformance case is named "${name}"`);
    }
  }
  const step = options.step ?? inLine;
  const h = await options.setup();
  try {
    const context = new CaseContext(h, options.leaseMs ?? 200);
    for (const c of CASES) {
      if (only && !only.has(c.name)) continue;
      const unmet = (c.needs ?? []).filter((need) => !HAS[need](h));
      const shown = unmet.find((need) => SHOWN_NEEDS.has(need));
      if (shown !== undefined) {
        // An optional method missing is shown, never passed in silence.
        await step(`${c.name} (skipped: the store has no ${shown}())`, noop);
      }
      if (unmet.length > 0) continue;
      await step(c.name, () => c.run(context));
    }
  } finally {
    await h.teardown?.();
  }
}

const noop = () => Promise.resolve();

/** Runs a case in line; a failure rejects with the case's name. */
async function inLine(name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (error) {
    const cause = { cause: error };
    throw new Error(`Store conformance case failed: ${name}`, cause);
  }
}
