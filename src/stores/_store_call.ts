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

/** How a store words the errors of its calls. */
export interface StoreErrors {
  /** The call failed in time with `cause`. */
  failed(operation: StoreOperation, cause: unknown): StoreError;
  /** The call's deadline passed first. */
  timedOut(operation: StoreOperation): StoreError;
}

/** What a claim needs to be undone when it lands after its caller's error. */
export interface Undo<T> {
  /** The claimed slot. */
  slot: string;
  /** The claim's lease. */
  leaseMs: number;
  /** The claim's token, when the store made it before sending the claim. */
  token?: string;
  /** The token a late value says the claim acquired the slot under, if any. */
  acquired(value: T): string | undefined;
  /** Whether a failure may hide a claim that landed. @default never */
  mayHaveRun?(error: unknown): boolean;
}

/** A call as its work sees it. */
export interface StoreCall {
  /**
   * Throws once the deadline has passed. Work of several steps calls it
   * before each further step: after the deadline it sends nothing more.
   */
  throwIfExpired(): void;
}

/** Thrown by {@linkcode StoreCall.throwIfExpired}: nothing more was sent. */
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
 * Runs a store's calls to its service, each within the same `timeoutMs` on a
 * monotonic clock. One timer watches them all: the calls pending are kept in
 * start order, which is deadline order, and the timer is armed for the
 * oldest. It keeps the process alive only while calls are pending. A
 * deadline only stops the waiting: the work goes on, and a claim among it
 * that lands late is undone (see {@linkcode Undo}).
 */
export class StoreCalls {
  readonly #ms: number;
  readonly #orphans: Orphans;
  readonly #errors: StoreErrors;
  readonly #clock: Pick<Clock, "now">;
  #pending = new List<Pending>();
  #timer: Timer | undefined;

  /**
   * @param timeoutMs How long each call may take (`Infinity`: no deadline).
   * @param orphans The store's undo work, told when the service answers.
   * @param errors How the store words a failure or a timeout.
   * @param clock The monotonic clock deadlines are measured on.
   */
  constructor(
    timeoutMs: number,
    orphans: Orphans,
    errors: StoreErrors,
    clock: Pick<Clock, "now"> = SYSTEM_CLOCK,
  ) {
    this.#ms = timeoutMs;
    this.#orphans = orphans;
    this.#errors = errors;
    this.#clock = clock;
  }

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
      const at = this.#clock.now() + this.#ms;
      // The value `resolve` gets is the one `work` answers.
      const answer = resolve as (value: unknown) => void;
      const call = new Pending(at, operation, undo, answer, reject);
      if (this.#ms !== Infinity) this.#watch(call);
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
      this.#timer = setTimeout(this.#fire, this.#ms);
    } else refTimer(this.#timer, true);
  }

  #settle(call: Pending, value: unknown, failed: boolean): void {
    const undo = call.undo;
    if (call.expired) {
      // The caller has its error: tell Orphans whether the claim landed.
      if (call.orphan === undefined) return;
      let token: string | undefined;
      if (!failed) token = undo!.acquired(value);
      else if (value !== ABANDONED && undo!.mayHaveRun?.(value)) {
        token = undo!.token;
      }
      this.#orphans.cameBack(call.orphan, token);
      return;
    }
    if (this.#pending.remove(call) && this.#pending.head === undefined) {
      refTimer(this.#timer!, false);
    }
    if (!failed) {
      this.#orphans.serviceAnswered();
      call.resolve(value);
      return;
    }
    if (undo?.token !== undefined && undo.mayHaveRun?.(value)) {
      this.#orphans.undo(undo.slot, undo.token, undo.leaseMs);
    }
    call.reject(this.#errors.failed(call.operation, value));
  }

  #fire = (): void => {
    this.#timer = undefined;
    const now = this.#clock.now();
    for (let call = this.#pending.head; call; call = this.#pending.head) {
      if (call.at > now) {
        this.#timer = setTimeout(this.#fire, call.at - now);
        return;
      }
      this.#pending.remove(call);
      call.expired = true;
      const undo = call.undo;
      if (undo !== undefined) {
        call.orphan = this.#orphans.watch(undo.slot, undo.token, undo.leaseMs);
      }
      call.reject(this.#errors.timedOut(call.operation));
    }
  };
}
