// Copyright 2026 the @idempotent/http authors. MIT license.
/** KvStore's unit of work: the handler's checks and mutations, committed with the record. @module */

import type { StoredResponse, UnitOfWork, WriteOutcome } from "../store.ts";

const COLLECTED = new WeakMap<
  KvMutations,
  { checks: Deno.AtomicCheck[]; mutations: Deno.KvMutation[] }
>();

/**
 * The checks and mutations a handler commits together with its request's
 * record, in one `kv.atomic()` commit: obtained from `KvStore.atomic()`.
 * Nothing is written until the middleware completes the record.
 *
 * @example Collect a mutation (the middleware commits it)
 * ```ts
 * import { KvMutations } from "@idempotent/http/kv";
 * import assert from "node:assert/strict";
 *
 * const mutations = new KvMutations().set(["orders", 1], { item: "book" });
 * assert.ok(mutations instanceof KvMutations);
 * ```
 */
export class KvMutations {
  constructor() {
    COLLECTED.set(this, { checks: [], mutations: [] });
  }

  /** As `AtomicOperation.check`: a failed check commits nothing (503, the retry runs). */
  check(...checks: Deno.AtomicCheck[]): this {
    COLLECTED.get(this)!.checks.push(...checks);
    return this;
  }

  /** As `AtomicOperation.set`, when the record commits. */
  set(
    key: Deno.KvKey,
    value: unknown,
    options?: { expireIn?: number },
  ): this {
    return this.mutate({ type: "set", key, value, ...options });
  }

  /** As `AtomicOperation.delete`, when the record commits. */
  delete(key: Deno.KvKey): this {
    return this.mutate({ type: "delete", key });
  }

  /** As `AtomicOperation.mutate` (`sum`, `min`, `max`, …), when the record commits. */
  mutate(...mutations: Deno.KvMutation[]): this {
    COLLECTED.get(this)!.mutations.push(...mutations);
    return this;
  }
}

/** Adds a handler's checks and mutations to the commit that completes its record. */
export function applyMutations(
  mutations: KvMutations,
  op: Deno.AtomicOperation,
): Deno.AtomicOperation {
  const { checks, mutations: list } = COLLECTED.get(mutations)!;
  return op.check(...checks).mutate(...list);
}

/** Whether the handler added checks of its own. */
export function hasChecks(mutations: KvMutations): boolean {
  return COLLECTED.get(mutations)!.checks.length > 0;
}

type Complete = (
  record: StoredResponse,
  mutations: KvMutations,
) => Promise<WriteOutcome>;

/** One claimed request's unit of work, completed by the store's `complete`. */
export class KvUnit implements UnitOfWork {
  #mutations: KvMutations | undefined;
  #complete: Complete;

  constructor(complete: Complete) {
    this.#complete = complete;
  }

  get opened(): boolean {
    return this.#mutations !== undefined;
  }

  mutations(): KvMutations {
    return this.#mutations ??= new KvMutations();
  }

  async commit(record: StoredResponse): Promise<"committed" | "lost"> {
    const outcome = await this.#complete(record, this.#mutations!);
    return outcome === "applied" ? "committed" : "lost";
  }

  rollback(): Promise<void> {
    // Nothing was written: the mutations are dropped with the unit.
    return Promise.resolve();
  }
}
