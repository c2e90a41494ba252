// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode StoreCalls}, the one store-call deadline, and
 * {@linkcode serviceCalls}, the setup every store makes it with.
 * @module
 */

import {
  type Clock,
  type Linked,
  List,
  refTimer,
  SYSTEM_CLOCK,
  type Timer,
} from "../_async.ts";
import {
  type AdminOperation,
  StoreError,
  type StoreEvent,
  type StoreOperation,
  type WriteOutcome,
} from "../store.ts";
import { type Orphan, Orphans } from "./_orphans.ts";

/** Any operation a store times: the middleware's or an admin's. */
export type Operation = StoreOperation | AdminOperation;

/** How a store words a call that failed in time, or timed out. */
export interface StoreErrors {
  failed(operation: Operation, cause: unknown): StoreError;
  timedOut(operation: Operation): StoreError;
}

/** How to undo a claim that may land after its caller got an error. */
export interface Undo<T> {
  slot: string;
  leaseMs: number;
  /** The claim's token, when the store made it before sending the claim. */
  token?: string;
  /** The token a late value says the claim acquired the slot under, if any. */
  acquired(value: T): string | undefined;
  /** Whether a failure may hide a claim that landed. @default never */
  mayHaveRun?(error: unknown): boolean;
}

/** What {@linkcode StoreCall.throwIfExpired} throws: nothing more was sent. */
const ABANDONED = new Error("The deadline passed: nothing more was sent");

/** One call: its work calls `throwIfExpired()` before each step. */
export class StoreCall implements Linked<StoreCall> {
  prev: StoreCall | undefined = undefined;
  next: StoreCall | undefined = undefined;
  orphan: Orphan | undefined = undefined;
  expired = false;
  constructor(
    readonly at: number,
    readonly operation: Operation,
    public undo: Undo<unknown> | undefined,
    readonly resolve: (value: unknown) => void,
    readonly reject: (error: StoreError) => void,
  ) {}

  throwIfExpired(): void {
    if (this.expired) throw ABANDONED;
  }
}

/**
 * A store's calls, each given `ms` (`Infinity`: none) on a monotonic clock
 * (docs/architecture.md, "Store calls and deadlines"); the one timer is a
 * global `setTimeout`, as a `Clock`'s never holds the process.
 */
export class StoreCalls {
  #pending = new List<StoreCall>();
  #timer: Timer | undefined;

  constructor(
    readonly ms: number,
    readonly orphans: Orphans,
    readonly errors: StoreErrors,
    readonly clock: Pick<Clock, "now"> = SYSTEM_CLOCK,
  ) {}

  /** Runs `work` until the deadline; `undo` undoes a claim that lands late. */
  run<T>(
    operation: Operation,
    work: (call: StoreCall) => PromiseLike<T>,
    undo?: Undo<T>,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const at = this.clock.now() + this.ms;
      const answer = resolve as (value: unknown) => void;
      const call = new StoreCall(at, operation, undo, answer, reject);
      if (this.ms !== Infinity) this.#watch(call);
      let pending: PromiseLike<T>;
      try {
        pending = work(call);
      } catch (error) {
        call.undo = undefined; // nothing was sent: nothing can land
        return this.#settle(call, error, true);
      }
      pending.then(
        (value) => this.#settle(call, value, false),
        (error) => this.#settle(call, error, true),
      );
    });
  }

  #watch(call: StoreCall): void {
    const idle = this.#pending.head === undefined;
    this.#pending.push(call);
    if (idle && this.#timer !== undefined) refTimer(this.#timer, true);
    else if (idle) this.#timer = setTimeout(this.#fire, this.ms);
  }

  #settle(call: StoreCall, value: unknown, failed: boolean): void {
    if (call.expired) return this.#late(call, value, failed);
    if (this.#pending.remove(call) && this.#pending.head === undefined) {
      refTimer(this.#timer!, false);
    }
    if (!failed) {
      this.orphans.serviceAnswered();
      return call.resolve(value);
    }
    const undo = call.undo;
    if (undo?.token !== undefined && undo.mayHaveRun?.(value)) {
      this.orphans.undo(undo.slot, undo.token, undo.leaseMs);
    }
    call.reject(this.errors.failed(call.operation, value));
  }

  /** A call settled after its deadline: tells Orphans if its claim landed. */
  #late({ undo, orphan }: StoreCall, value: unknown, failed: boolean): void {
    if (orphan === undefined) return;
    if (!failed) return this.orphans.cameBack(orphan, undo!.acquired(value));
    const ran = value !== ABANDONED && undo!.mayHaveRun?.(value);
    this.orphans.cameBack(orphan, ran ? undo!.token : undefined);
  }

  #fire = (): void => {
    this.#timer = undefined;
    const now = this.clock.now();
    for (let call = this.#pending.head; call; call = this.#pending.head) {
      if (call.at > now) {
        this.#timer = setTimeout(this.#fire, call.at - now);
        return;
      }
      this.#pending.remove(call);
      call.expired = true;
      const undo = call.undo;
      if (undo !== undefined) {
        call.orphan = this.orphans.watch(undo.slot, undo.token, undo.leaseMs);
      }
      call.reject(this.errors.timedOut(call.operation));
    }
  };
}

/**
 * The one `timeoutMs` rule of every store: a positive integer of
 * milliseconds, or `Infinity` for no deadline; `undefined` is `defaultMs`.
 */
export function timeoutOption(value: unknown, defaultMs: number): number {
  const ms = value ?? defaultMs;
  if (ms === Infinity || (Number.isSafeInteger(ms) && (ms as number) > 0)) {
    return ms as number;
  }
  throw new RangeError(
    `'timeoutMs' must be a positive integer of milliseconds, or Infinity: current value is ${
      typeof ms === "string" ? JSON.stringify(ms) : ms
    }`,
  );
}

/** What a store tells {@linkcode serviceCalls}. */
export interface ServiceSetup {
  /** The service as messages name it: `"Redis"`, `"Deno KV"`, `"PostgreSQL"`. */
  service: string;
  /** From {@linkcode timeoutOption}. */
  timeoutMs: number;
  /** The store's checked `onEvent` option. */
  onEvent: ((event: StoreEvent) => void) | undefined;
  /** The store's own release, for the undo queue. */
  release(slot: string, token: string): Promise<WriteOutcome>;
  /** How the store words a call that failed before its deadline. */
  failed(operation: Operation, cause: unknown): StoreError;
  /** What to say after a timeout, if anything (Redis: the client's state). */
  hint?(): string | undefined;
}

/**
 * A store's undo queue and its calls under one deadline, a timeout worded
 * `<service> <operation> did not answer within <ms> ms[: <hint>]`.
 */
export function serviceCalls(
  setup: ServiceSetup,
): { calls: StoreCalls; orphans: Orphans } {
  const { service, timeoutMs, hint } = setup;
  const orphans = new Orphans(setup.release);
  orphans.onEvent = setup.onEvent;
  const calls = new StoreCalls(timeoutMs, orphans, {
    failed: setup.failed,
    timedOut: (operation) => {
      const then = hint?.();
      return new StoreError(
        `${service} ${operation} did not answer within ${timeoutMs} ms${
          then ? `: ${then}` : ""
        }`,
        { operation, cause: new Error(`Timed out after ${timeoutMs} ms`) },
      );
    },
  });
  return { calls, orphans };
}
