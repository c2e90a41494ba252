// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the completion tests share (`completion_test.ts`,
 * `completion_stores_test.ts`): {@linkcode FlakyStore}, a real store behind
 * chosen faults, and the {@linkcode Watch} it resolves waiters with.
 *
 * @module
 */
import type { StoreOperation } from "../src/store.ts";
import { StoreError } from "../src/store.ts";
import { deferred } from "./_support/time.ts";
import { StoreWrapper } from "./_support/stores.ts";

/** What a fault does to one store call: throw before it, throw after it, or let it through. */
export type Fault = "throw" | "after" | "pass";

/** Resolves waiters whenever something they watch may have changed. */
export class Watch {
  #waiters: { check: () => boolean; resolve: () => void }[] = [];
  notify(): void {
    this.#waiters = this.#waiters.filter((w) => {
      if (!w.check()) return true;
      w.resolve();
      return false;
    });
  }
  until(check: () => boolean): Promise<void> {
    if (check()) return Promise.resolve();
    const { promise, resolve } = deferred();
    this.#waiters.push({ check, resolve });
    return promise;
  }
}

/**
 * A real store behind chosen faults: `faults[op]` decides each call (it may
 * wait first, e.g. on a gate). Logs every call, in order.
 */
export class FlakyStore extends StoreWrapper {
  readonly log: { op: StoreOperation; slot: string }[] = [];
  readonly faults: Partial<
    Record<StoreOperation, (slot: string, n: number) => Fault | Promise<Fault>>
  > = {};
  readonly watch = new Watch();

  count(op: StoreOperation, slot: string): number {
    return this.log.filter((c) => c.op === op && c.slot === slot).length;
  }

  protected override async around<T>(
    op: StoreOperation,
    slot: string,
    run: () => Promise<T>,
  ): Promise<T> {
    this.log.push({ op, slot });
    this.watch.notify();
    const fault = await (this.faults[op]?.(slot, this.count(op, slot)) ??
      "pass");
    if (fault === "throw") {
      throw new StoreError(`injected ${op} failure`, { operation: op });
    }
    const result = await run();
    if (fault === "after") {
      throw new StoreError(`injected ${op} timeout`, { operation: op });
    }
    return result;
  }
}
