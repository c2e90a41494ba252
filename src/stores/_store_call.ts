// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode StoreCalls}: the one way a store bounds how long it waits for
 * its service, and hands a claim that may land after its caller got an error
 * to {@linkcode Orphans} (docs/architecture.md, "Rules": nothing left behind).
 *
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
import type { StoreError, StoreOperation } from "../store.ts";
import type { Orphan, Orphans } from "./_orphans.ts";

/** How a store words a call that failed in time, or timed out. */
export interface StoreErrors {
  /** The call failed in time with `cause`. */
  failed(operation: StoreOperation, cause: unknown): StoreError;
  /** The call's deadline passed first. */
  timedOut(operation: StoreOperation): StoreError;
}

/** How to undo a claim that may land after its caller got an error. */
export interface Undo<T> {
  /** The claimed slot and the claim's lease. */
  slot: string;
  leaseMs: number;
  /** The claim's token, when the store made it before sending the claim. */
  token?: string;
  /** The token a late value says the claim acquired the slot under, if any. */
  acquired(value: T): string | undefined;
  /** Whether a failure may hide a claim that landed. @default never */
  mayHaveRun?(error: unknown): boolean;
}

/** A call, as its work sees it. */
export interface StoreCall {
  /** Throws once the deadline has passed: work checks it before each step. */
  throwIfExpired(): void;
}

/** What {@linkcode StoreCall.throwIfExpired} throws: nothing more was sent. */
const ABANDONED = new Error("The deadline passed: nothing more was sent");

class Pending implements StoreCall, Linked<Pending> {
  prev: Pending | undefined = undefined;
  next: Pending | undefined = undefined;
  orphan: Orphan | undefined = undefined;
  expired = false;
  constructor(
    readonly at: number,
    readonly operation: StoreOperation,
    public undo: Undo<unknown> | undefined,
    readonly resolve: (value: unknown) => void,
    readonly reject: (error: StoreError) => void,
  ) {}

  throwIfExpired(): void {
    if (this.expired) throw ABANDONED;
  }
}

/**
 * A store's calls to its service, each given the same `timeoutMs` on a
 * monotonic clock. One timer watches them all: pending calls are kept in
 * start order, which is deadline order, and the timer is armed for the
 * oldest; it keeps the process alive only while calls are pending (so it
 * is a global `setTimeout`: a `Clock`'s timers never hold the process). A
 * deadline only stops the waiting: the work goes on, and a claim that lands
 * after it is undone (see {@linkcode Undo}).
 */
export class StoreCalls {
  #pending = new List<Pending>();
  #timer: Timer | undefined;

  /**
   * @param ms How long each call may take (`Infinity`: no deadline).
   * @param orphans The store's undo work, told when the service answers.
   * @param errors How the store words a failure or a timeout.
   * @param clock The monotonic clock deadlines are measured on.
   */
  constructor(
    readonly ms: number,
    readonly orphans: Orphans,
    readonly errors: StoreErrors,
    readonly clock: Pick<Clock, "now"> = SYSTEM_CLOCK,
  ) {}

  /**
   * Starts `work` and waits for it until the deadline.
   *
   * @param operation What the call does, for its error.
   * @param work Sends the call; a `work` that throws at once sent nothing.
   * @param undo For a claim: how to undo it should it land late.
   * @returns The work's value; rejects with the store's {@linkcode StoreError}.
   */
  run<T>(
    operation: StoreOperation,
    work: (call: StoreCall) => PromiseLike<T>,
    undo?: Undo<T>,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const at = this.clock.now() + this.ms;
      // The value `resolve` gets is the one `work` answers.
      const answer = resolve as (value: unknown) => void;
      const call = new Pending(at, operation, undo, answer, reject);
      if (this.ms !== Infinity) this.#watch(call);
      let pending: PromiseLike<T>;
      try {
        pending = work(call);
      } catch (error) {
        call.undo = undefined; // nothing was sent: nothing can land
        this.#settle(call, error, true);
        return;
      }
      pending.then(
        (value) => this.#settle(call, value, false),
        (error) => this.#settle(call, error, true),
      );
    });
  }

  #watch(call: Pending): void {
    const idle = this.#pending.head === undefined;
    this.#pending.push(call);
    if (!idle) return;
    if (this.#timer === undefined) {
      this.#timer = setTimeout(this.#fire, this.ms);
    } else refTimer(this.#timer, true);
  }

  #settle(call: Pending, value: unknown, failed: boolean): void {
    if (call.expired) return this.#late(call, value, failed);
    if (this.#pending.remove(call) && this.#pending.head === undefined) {
      refTimer(this.#timer!, false);
    }
    const undo = call.undo;
    if (!failed) {
      this.orphans.serviceAnswered();
      call.resolve(value);
      return;
    }
    if (undo?.token !== undefined && undo.mayHaveRun?.(value)) {
      this.orphans.undo(undo.slot, undo.token, undo.leaseMs);
    }
    call.reject(this.errors.failed(call.operation, value));
  }

  /** A call settled after its deadline: tells Orphans if its claim landed. */
  #late({ undo, orphan }: Pending, value: unknown, failed: boolean): void {
    if (orphan === undefined) return;
    let token: string | undefined;
    if (!failed) token = undo!.acquired(value);
    else if (value !== ABANDONED && undo!.mayHaveRun?.(value)) {
      token = undo!.token;
    }
    this.orphans.cameBack(orphan, token);
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
