// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore's unit of work: the handler's own Deno KV checks and mutations,
 * committed with the record.
 *
 * @module
 */

import type { StoredResponse, UnitOfWork, WriteOutcome } from "../store.ts";

/** What a handler asked to commit with its record. */
interface Collected {
  checks: Deno.AtomicCheck[];
  mutations: Deno.KvMutation[];
}

const COLLECTED = new WeakMap<KvMutations, Collected>();

/**
 * The checks and mutations a handler commits together with its request's
 * record, in one `kv.atomic()` commit: obtained from `KvStore.atomic()`.
 * Nothing is written until the middleware completes the record; a throw or a
 * response that is not cacheable discards them.
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

  /**
   * Commits only if each entry still has the versionstamp it was read with,
   * as `AtomicOperation.check`. A failed check commits nothing: the client
   * gets 503 and its retry runs the handler again.
   *
   * @param checks Entries read with `kv.get()`, or `{ key, versionstamp }`.
   * @returns This, for chaining.
   */
  check(...checks: Deno.AtomicCheck[]): this {
    COLLECTED.get(this)!.checks.push(...checks);
    return this;
  }

  /**
   * Sets `key` to `value` when the record commits.
   *
   * @param key The key.
   * @param value The value.
   * @param options Its `expireIn`, as `AtomicOperation.set`.
   * @returns This, for chaining.
   */
  set(
    key: Deno.KvKey,
    value: unknown,
    options?: { expireIn?: number },
  ): this {
    return this.mutate({ type: "set", key, value, ...options });
  }

  /**
   * Deletes `key` when the record commits.
   *
   * @param key The key.
   * @returns This, for chaining.
   */
  delete(key: Deno.KvKey): this {
    return this.mutate({ type: "delete", key });
  }

  /**
   * Adds any mutation (`sum`, `min`, `max`, …), as `AtomicOperation.mutate`.
   *
   * @param mutations The mutations.
   * @returns This, for chaining.
   */
  mutate(...mutations: Deno.KvMutation[]): this {
    COLLECTED.get(this)!.mutations.push(...mutations);
    return this;
  }
}

/**
 * Adds a handler's checks and mutations to the commit that completes its
 * record.
 *
 * @param mutations What the handler collected.
 * @param op The completing commit.
 * @returns `op`.
 */
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

/** The store's fenced completion of a record, with the handler's mutations. */
type Complete = (
  record: StoredResponse,
  mutations: KvMutations,
) => Promise<WriteOutcome>;

/** One claimed request's unit of work on a KvStore. */
export class KvUnit implements UnitOfWork {
  #mutations: KvMutations | undefined;
  #complete: Complete;

  /** @param complete The store's fenced completion, with the mutations. */
  constructor(complete: Complete) {
    this.#complete = complete;
  }

  get opened(): boolean {
    return this.#mutations !== undefined;
  }

  /** The request's mutations, made on first call. */
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
