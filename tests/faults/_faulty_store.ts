// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode FaultyStore}: a real store with faults put in front of it, per
 * operation and per outcome, for the fault-injection suite.
 *
 * A fault is one of:
 *
 * - `throw`: a {@linkcode StoreError} before the real call: the operation
 *   surely did not happen (a refused connection).
 * - `late`: the real call runs and lands, then a {@linkcode StoreError} is
 *   thrown: the caller cannot tell that it happened (a timeout whose command
 *   the server already held).
 * - `lost`: the write is not forwarded and answers `lost`, as when another
 *   owner has taken the slot over (`complete`, `release`, `extend` only; a
 *   claim has no such outcome).
 * - `hang`: the call waits, without reaching the real store, until the test
 *   calls {@linkcode FaultyStore.releaseHung}; then it runs for real and
 *   answers what the real store answers (a store that stalls and recovers).
 *
 * Each rule fires on every `every`-th matching call, `times` times (once by
 * default; `Infinity` for always), so "fails once", "fails n times" and
 * "fails every third call" are all one rule. For a fault a test switches on
 * and off as it goes, {@linkcode FaultyStore.failing} holds the operations
 * that `throw` on every call while they are in it.
 *
 * @module
 */
import {
  type IdempotencyStore,
  StoreError,
  type StoreOperation,
} from "../../src/store.ts";
import { callCounts, StoreWrapper } from "../_support/stores.ts";

/** What an injected fault does. */
export type FaultKind = "throw" | "late" | "lost" | "hang";

/** One fault plan entry. */
export interface FaultRule {
  /** The operation it applies to. */
  operation: StoreOperation;
  /** What it does. */
  kind: FaultKind;
  /** How many times it fires. @default {1} */
  times?: number;
  /** It fires on every `every`-th call of the operation. @default {1} */
  every?: number;
}

interface LiveRule {
  rule: FaultRule;
  left: number;
  seen: number;
}

/** The key of the counts of injected faults: `operation:kind`. */
export type FaultCounts = Record<string, number>;

/**
 * A store that fails chosen operations of a real store, as a plan says, and
 * counts every call.
 */
export class FaultyStore extends StoreWrapper {
  /** Calls per operation, faulty or not. */
  readonly calls: Record<StoreOperation, number> = callCounts();
  /** Faults injected, by `operation:kind`. */
  readonly injected: FaultCounts = {};
  /** Operations that `throw` on every call while they are in this set. */
  readonly failing: Set<StoreOperation> = new Set();
  #rules: LiveRule[] = [];
  #hung: (() => void)[] = [];
  #waiters: { operation: StoreOperation | "hang"; resolve: () => void }[] = [];

  /**
   * Wraps a real store.
   *
   * @param inner The real store.
   * @param rules The initial fault plan.
   */
  constructor(inner: IdempotencyStore, rules: FaultRule[] = []) {
    super(inner);
    for (const rule of rules) this.inject(rule);
  }

  /**
   * Adds a rule to the plan.
   *
   * @param rule The fault to inject.
   */
  inject(rule: FaultRule): void {
    if (rule.operation === "claim" && rule.kind === "lost") {
      throw new TypeError("a claim has no 'lost' outcome");
    }
    this.#rules.push({ rule, left: rule.times ?? 1, seen: 0 });
  }

  /** Removes every rule (hung calls stay hung until released). */
  clear(): void {
    this.#rules = [];
  }

  /** The total of faults injected so far. */
  get faults(): number {
    return Object.values(this.injected).reduce((a, b) => a + b, 0);
  }

  /** How many calls are hanging now. */
  get hanging(): number {
    return this.#hung.length;
  }

  /** Lets every hanging call go on to the real store. */
  releaseHung(): void {
    const hung = this.#hung;
    this.#hung = [];
    for (const go of hung) go();
  }

  /**
   * Resolves at the next call of `operation` (or the next hang, with
   * `"hang"`): a test waits for that event, never for a duration.
   *
   * @param operation What to wait for.
   * @returns When it happened.
   */
  next(operation: StoreOperation | "hang"): Promise<void> {
    return new Promise((resolve) => this.#waiters.push({ operation, resolve }));
  }

  #notify(operation: StoreOperation | "hang"): void {
    const waiting = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiting) {
      if (waiter.operation === operation) waiter.resolve();
      else this.#waiters.push(waiter);
    }
  }

  #fault(operation: StoreOperation): FaultKind | undefined {
    if (this.failing.has(operation)) return this.#count(operation, "throw");
    for (const live of this.#rules) {
      if (live.rule.operation !== operation || live.left <= 0) continue;
      live.seen++;
      if (live.seen % (live.rule.every ?? 1) !== 0) continue;
      live.left--;
      return this.#count(operation, live.rule.kind);
    }
    return undefined;
  }

  #count(operation: StoreOperation, kind: FaultKind): FaultKind {
    const key = `${operation}:${kind}`;
    this.injected[key] = (this.injected[key] ?? 0) + 1;
    return kind;
  }

  protected override async around<T>(
    operation: StoreOperation,
    _slot: string,
    run: () => Promise<T>,
  ): Promise<T> {
    this.calls[operation]++;
    const kind = this.#fault(operation);
    this.#notify(operation);
    switch (kind) {
      case undefined:
        return await run();
      case "throw":
        throw new StoreError(`Injected ${operation} failure`, {
          operation,
          cause: new Error("ECONNRESET (injected)"),
        });
      case "late": {
        await run();
        throw new StoreError(`Injected ${operation} timeout after it landed`, {
          operation,
          cause: new Error("timed out (injected)"),
        });
      }
      case "lost": // never a claim's: inject() refuses that rule
        return "lost" as T;
      case "hang": {
        await new Promise<void>((resolve) => {
          this.#hung.push(resolve);
          this.#notify("hang");
        });
        return await run();
      }
    }
  }
}
