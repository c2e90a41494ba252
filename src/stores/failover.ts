// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode FailoverStore}: a primary store that serves while it is
 * reachable and a fallback that serves while it is not, consulted on every
 * primary miss.
 *
 * @module
 */

import {
  assertSlot,
  type ClaimOptions,
  claimOptions,
  type ClaimResult,
  durationMs,
  type IdempotencyStore,
  type StoredResponse,
  StoreError,
  type StoreOperation,
  type WriteOutcome,
} from "../store.ts";
import { optionalBoolean, optionalFunction } from "../_validate.ts";
export * from "./_contract.ts";

/** One of the two stores of a {@linkcode FailoverStore}. */
export type FailoverRole = "primary" | "fallback";

/**
 * What a {@linkcode FailoverStore} reports through
 * {@linkcode FailoverStoreOptions.onEvent}, for logs, metrics and alerts
 * (none changes an answer):
 *
 * - `fallback`: the primary threw on a claim, which went to the fallback
 *   alone; `error` is the primary's.
 * - `recovered`: the fallback held the completed record that answers the
 *   claim; `copied` says whether it was copied into the primary.
 * - `fallback_unavailable`: the primary missed and the fallback threw: the
 *   claim went to the primary alone, or was refused as the fallback had
 *   never answered.
 * - `write_failed`: one store threw on a write that went to both, or on a
 *   best-effort copy or release; the other store's answer stands.
 * - `diverged`: a write that went to both was applied by one and lost by
 *   the other.
 */
export type FailoverEvent =
  | { type: "fallback"; operation: "claim"; slot: string; error: unknown }
  | { type: "recovered"; slot: string; copied: boolean }
  | {
    type: "fallback_unavailable";
    operation: "claim";
    slot: string;
    error: unknown;
  }
  | {
    type: "write_failed";
    operation: StoreOperation;
    store: FailoverRole;
    slot: string;
    error: unknown;
  }
  | {
    type: "diverged";
    operation: Exclude<StoreOperation, "claim">;
    slot: string;
    primary: WriteOutcome;
    fallback: WriteOutcome;
  };

/** Options of the {@linkcode FailoverStore} constructor. */
export interface FailoverStoreOptions {
  /** The fast store, such as a `RedisStore`: give it a short timeout. */
  primary: IdempotencyStore;
  /** The durable store, such as a `PostgresStore`. */
  fallback: IdempotencyStore;
  /**
   * Whether a claim fails when the primary misses and the fallback cannot
   * be reached, rather than being granted on the primary alone.
   *
   * @default {false}
   */
  strict?: boolean;
  /** Receives every {@linkcode FailoverEvent}, synchronously; a throw is ignored. */
  onEvent?: (event: FailoverEvent) => void;
}

/** A decoded token: the tokens of the stores that issued it. */
type Route = { primary?: string; fallback?: string };

// Tokens: "p:<primary>", "f:<fallback>", "b:<plen>.<flen>:<primary><fallback>".
// Both lengths must add up exactly, so a token with anything appended or cut
// off is malformed (every write `lost`) rather than the primary's real token
// followed by a wrong fallback token.
const B_TOKEN = /^b:(\d{1,6})\.(\d{1,6}):/;

function route(token: unknown): Route | null {
  if (typeof token !== "string" || token.length < 3 || token[1] !== ":") {
    return null;
  }
  if (token[0] === "p") return { primary: token.slice(2) };
  if (token[0] === "f") return { fallback: token.slice(2) };
  const match = token[0] === "b" ? B_TOKEN.exec(token) : null;
  if (match === null) return null;
  const p = Number(match[1]);
  const f = Number(match[2]);
  const start = match[0].length;
  if (p === 0 || f === 0 || token.length !== start + p + f) return null;
  return { primary: token.slice(start, start + p), fallback: token.slice(-f) };
}

function both(primary: string, fallback: string): string {
  return `b:${primary.length}.${fallback.length}:${primary}${fallback}`;
}

function assertStore(name: string, store: unknown): void {
  const s = store as Record<string, unknown> | null | undefined;
  for (const method of ["claim", "complete", "release", "extend"]) {
    if (typeof s?.[method] !== "function") {
      throw new TypeError(
        `'${name}' must be an IdempotencyStore: it has no ${method}() method`,
      );
    }
  }
}

/** What one store did with a write: its outcome, or the error it threw. */
type Settled =
  | { ok: true; value: WriteOutcome }
  | { ok: false; error: unknown };

async function settle(write: () => Promise<WriteOutcome>): Promise<Settled> {
  try {
    return { ok: true, value: await write() };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * An {@linkcode IdempotencyStore} on two stores: a primary (such as a
 * `RedisStore`) that serves while it is reachable, and a fallback (such as a
 * `PostgresStore`) that serves while it is not and is consulted on every
 * primary miss, so that a primary outage neither stops the service nor, once
 * the primary is back (possibly empty), lets a retry run a handler twice.
 * When one store is enough, use it alone: this one costs a round trip to
 * each for every fresh key. It never connects or closes its stores
 * (`examples/failover.ts` wires Redis first, PostgreSQL as the fallback).
 *
 * **Claims.**
 * 1. The primary claims. If it throws, the fallback claims alone (event
 *    `fallback`, an `f:` token); if that throws too, a {@linkcode StoreError}
 *    whose cause is an `AggregateError` of both.
 * 2. A primary `completed` is the answer: one round trip.
 * 3. A primary `in_flight` may be an orphan (a claim that timed out in an
 *    outage and landed late) while the key completed through the fallback,
 *    so the fallback claims too: its `completed` is the answer (event
 *    `recovered`, not copied); else the primary's answer stands, and a
 *    fallback claim so made is released.
 * 4. A primary miss claims the fallback with the same options (a claim, not
 *    a read: of two instances that disagree on whether the primary is up,
 *    the first to claim the fallback wins). Its `acquired` owns both (a `b:`
 *    token); its `completed` is the answer, copied into the primary when the
 *    fingerprints match (event `recovered`); its `in_flight` is the answer.
 *    If it throws, with `strict` or while the fallback has never answered
 *    the claim throws; otherwise the slot is granted on the primary alone (a
 *    `p:` token, event `fallback_unavailable`). A primary claim that the
 *    answer does not use is released.
 *
 * **A fallback that never answered is not trusted**: a missing table would
 * look like an outage that never ends, every answer right and no durable
 * copy anywhere. Until the fallback has answered once (a claim, or
 * {@linkcode FailoverStore.migrate} resolving), a miss it cannot claim is
 * refused (503), saying to run `migrate()`. A fallback that breaks later
 * looks like an outage: watch the `fallback_unavailable` events.
 *
 * **Writes** go to the stores the token names; a malformed or foreign token
 * is `lost`. A `b:` slot is written in both at once, and the fallback's
 * answer is the answer: every new owner must get past it, and it survives a
 * primary restart (so renewals go on). A disagreement is event `diverged`;
 * when one store throws, the other's answer stands (event `write_failed`);
 * when both do, a {@linkcode StoreError}.
 *
 * **Costs**: a fresh key is a claim on each store in turn and a write on
 * both at once; a replay one primary round trip; a 409 a claim on each. In
 * an outage every claim first waits for the primary to fail: give it a
 * short timeout (and, on node-redis, no offline queue).
 *
 * **Not covered**: a record completed while the fallback was unreachable
 * lives in the primary alone, and is lost if the primary restarts empty. A
 * record copied into the primary gets a new TTL window there (the contract
 * carries no deadline).
 *
 * @example Serve through the fallback while the primary is down, and recover
 * ```ts
 * import { MemoryStore, type IdempotencyStore } from "@idempotent/http";
 * import { FailoverStore, type FailoverEvent } from "@idempotent/http/failover";
 * import assert from "node:assert/strict";
 *
 * let down = true; // the primary throws while down, as an unreachable Redis would
 * const redis = new MemoryStore();
 * const primary: IdempotencyStore = {
 *   claim: (...args) => down ? Promise.reject(new Error("ECONNREFUSED")) : redis.claim(...args),
 *   complete: (...args) => redis.complete(...args),
 *   release: (...args) => redis.release(...args),
 *   extend: (...args) => redis.extend(...args),
 * };
 * const events: FailoverEvent["type"][] = [];
 * const onEvent = (event: FailoverEvent) => events.push(event.type);
 * const store = new FailoverStore({ primary, fallback: new MemoryStore(), onEvent });
 * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 86_400_000 };
 *
 * const claim = await store.claim("slot-1", options); // served by the fallback
 * assert.ok(claim.state === "acquired" && claim.token.startsWith("f:"));
 * await store.complete("slot-1", claim.token, { status: 201, headers: [], body: new Uint8Array([1]) });
 * down = false; // the primary is back, and has never seen slot-1
 * assert.equal((await store.claim("slot-1", options)).state, "completed");
 * assert.deepEqual(events, ["fallback", "recovered"]);
 * assert.equal((await redis.claim("slot-1", options)).state, "completed"); // copied
 * ```
 */
export class FailoverStore implements IdempotencyStore {
  #primary: IdempotencyStore;
  #fallback: IdempotencyStore;
  #strict: boolean;
  #onEvent: ((event: FailoverEvent) => void) | undefined;
  /** Whether the fallback has answered once: only then is `strict: false` lenient. */
  #fallbackAnswered = false;

  /** Makes a store on two stores; throws a TypeError on a bad option. */
  constructor(options: FailoverStoreOptions) {
    assertStore("primary", options?.primary);
    if (options.fallback === undefined || options.fallback === null) {
      throw new TypeError(
        "'fallback' is required: a FailoverStore without a fallback is its primary alone; pass the durable store (such as a PostgresStore), or use the primary directly",
      );
    }
    assertStore("fallback", options.fallback);
    if (options.primary === options.fallback) {
      throw new TypeError(
        "'primary' and 'fallback' must be two different stores: the same store was passed twice",
      );
    }
    this.#primary = options.primary;
    this.#fallback = options.fallback;
    this.#strict = optionalBoolean("strict", options.strict ?? undefined);
    this.#onEvent = optionalFunction("onEvent", options.onEvent);
  }

  /**
   * Runs the fallback's `migrate()`, then the primary's, for each store that
   * has one (a `PostgresStore` creates its table). Run it at boot: it throws
   * when the fallback does not work, and once it resolves the fallback
   * counts as having answered.
   */
  async migrate(): Promise<void> {
    await migrateStore(this.#fallback);
    this.#fallbackAnswered = true;
    await migrateStore(this.#primary);
  }

  /** Claims `slot` on the primary and, on a primary miss, on the fallback. */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    options = claimOptions(options);
    let first: ClaimResult;
    try {
      first = await this.#primary.claim(slot, options);
    } catch (primaryError) {
      return await this.#claimFallback(slot, options, primaryError);
    }
    if (first.state === "in_flight") {
      return await this.#checkInFlight(slot, options, first);
    }
    if (first.state !== "acquired") return first;

    let second: ClaimResult;
    try {
      second = await this.#fallback.claim(slot, options);
      this.#fallbackAnswered = true;
    } catch (error) {
      const unavailable: FailoverEvent = {
        type: "fallback_unavailable",
        operation: "claim",
        slot,
        error,
      };
      if (!this.#fallbackAnswered) {
        await this.#releaseQuietly("primary", slot, first.token);
        this.#emit(unavailable);
        throw refused(
          "The fallback store has not answered once since this FailoverStore was made, so it is not trusted to be working (run 'await store.migrate()' at boot to create its table)",
          error,
        );
      }
      if (this.#strict) {
        await this.#releaseQuietly("primary", slot, first.token);
        throw refused(
          "The fallback store is unreachable, and 'strict' refuses a claim on the primary alone",
          error,
        );
      }
      this.#emit(unavailable);
      const { recovered } = first;
      return { state: "acquired", token: `p:${first.token}`, recovered };
    }

    switch (second.state) {
      case "acquired": {
        const token = both(first.token, second.token);
        const recovered = first.recovered || second.recovered;
        return { state: "acquired", token, recovered };
      }
      case "completed": {
        // Copy only a record of this very request: the primary keeps the
        // fingerprint of the claim just made, so a copy under another
        // request's fingerprint would turn the original's retries into 422s.
        let copied = false;
        if (second.fingerprint === options.fingerprint) {
          copied = await this.#bestEffort(
            "complete",
            "primary",
            slot,
            () => this.#primary.complete(slot, first.token, second.response),
          );
        } else {
          await this.#releaseQuietly("primary", slot, first.token);
        }
        this.#emit({ type: "recovered", slot, copied });
        return second;
      }
      case "in_flight":
        await this.#releaseQuietly("primary", slot, first.token);
        return second;
    }
  }

  /** Records `response` in the stores that issued `token`. */
  complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    const write = (store: IdempotencyStore, t: string) =>
      store.complete(slot, t, response);
    return this.#write("complete", slot, token, write);
  }

  /** Frees the slot in the stores that issued `token`. */
  release(slot: string, token: string): Promise<WriteOutcome> {
    const write = (store: IdempotencyStore, t: string) =>
      store.release(slot, t);
    return this.#write("release", slot, token, write);
  }

  /** Renews the lease in the stores that issued `token`. */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    leaseMs = durationMs("leaseMs", leaseMs);
    const write = (store: IdempotencyStore, t: string) =>
      store.extend(slot, t, leaseMs);
    return await this.#write("extend", slot, token, write);
  }

  /** Step 3 of a claim: the fallback decides whether a primary `in_flight` stands. */
  async #checkInFlight(
    slot: string,
    options: ClaimOptions,
    first: ClaimResult,
  ): Promise<ClaimResult> {
    let second: ClaimResult;
    try {
      second = await this.#fallback.claim(slot, options);
    } catch {
      return first;
    }
    if (second.state === "completed") {
      this.#emit({ type: "recovered", slot, copied: false });
      return second;
    }
    if (second.state === "acquired") {
      await this.#releaseQuietly("fallback", slot, second.token);
    }
    return first;
  }

  /** Step 1 of a claim, when the primary threw. */
  async #claimFallback(
    slot: string,
    options: ClaimOptions,
    error: unknown,
  ): Promise<ClaimResult> {
    let result: ClaimResult;
    try {
      result = await this.#fallback.claim(slot, options);
      this.#fallbackAnswered = true;
    } catch (fallbackError) {
      throw bothFailed("claim", "claim", error, fallbackError);
    }
    this.#emit({ type: "fallback", operation: "claim", slot, error });
    if (result.state !== "acquired") return result;
    const { recovered } = result;
    return { state: "acquired", token: `f:${result.token}`, recovered };
  }

  async #write(
    operation: Exclude<StoreOperation, "claim">,
    slot: string,
    token: string,
    write: (store: IdempotencyStore, token: string) => Promise<WriteOutcome>,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    const { primary, fallback } = route(token) ?? {};
    if (fallback === undefined) {
      return primary === undefined
        ? "lost"
        : await write(this.#primary, primary);
    }
    if (primary === undefined) return await write(this.#fallback, fallback);
    const [p, f] = await Promise.all([
      settle(() => write(this.#primary, primary)),
      settle(() => write(this.#fallback, fallback)),
    ]);
    if (!f.ok) {
      if (!p.ok) {
        const what = `${operation} (outcome unknown)`;
        throw bothFailed(operation, what, p.error, f.error);
      }
      this.#writeFailed(operation, "fallback", slot, f.error);
      return p.value;
    }
    if (!p.ok) {
      this.#writeFailed(operation, "primary", slot, p.error);
      return f.value;
    }
    if (p.value !== f.value) {
      this.#emit({
        type: "diverged",
        operation,
        slot,
        primary: p.value,
        fallback: f.value,
      });
    }
    return f.value;
  }

  /** Releases a claim that no answer depends on; reports a throw. */
  #releaseQuietly(
    role: FailoverRole,
    slot: string,
    token: string,
  ): Promise<boolean> {
    const store = role === "primary" ? this.#primary : this.#fallback;
    return this.#bestEffort(
      "release",
      role,
      slot,
      () => store.release(slot, token),
    );
  }

  /** Runs a write whose failure changes no answer; reports a throw. */
  async #bestEffort(
    operation: StoreOperation,
    store: FailoverRole,
    slot: string,
    write: () => Promise<WriteOutcome>,
  ): Promise<boolean> {
    const result = await settle(write);
    if (result.ok) return result.value === "applied";
    this.#writeFailed(operation, store, slot, result.error);
    return false;
  }

  #writeFailed(
    operation: StoreOperation,
    store: FailoverRole,
    slot: string,
    error: unknown,
  ): void {
    this.#emit({ type: "write_failed", operation, store, slot, error });
  }

  #emit(event: FailoverEvent): void {
    const listener = this.#onEvent;
    try {
      listener?.(event);
    } catch {
      // A listener's failure must not change what the store answers.
    }
  }
}

/** The error of a claim that the fallback's `error` refuses, for `reason`. */
function refused(reason: string, error: unknown): StoreError {
  const message = `${reason}: ${messageOf(error)}`;
  return new StoreError(message, { operation: "claim", cause: error });
}

const BOTH_FAILED = "The primary and the fallback store both failed";

/** The error of an operation that both stores threw on. */
function bothFailed(
  operation: StoreOperation,
  what: string,
  primary: unknown,
  fallback: unknown,
): StoreError {
  const message = `Both stores failed to ${what}: primary: ${
    messageOf(primary)
  }; fallback: ${messageOf(fallback)}`;
  const cause = new AggregateError([primary, fallback], BOTH_FAILED);
  return new StoreError(message, { operation, cause });
}

/** Runs a store's `migrate()` when it has one. */
async function migrateStore(store: IdempotencyStore): Promise<void> {
  const migrate = (store as { migrate?: unknown }).migrate;
  if (typeof migrate === "function") await migrate.call(store);
}

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : String(error);
}
