// Copyright 2026 the @idempotent/http authors. MIT license.
/** {@linkcode FailoverStore}: a primary, and a fallback behind it. @module */

import {
  assertSlot,
  type ClaimOptions,
  type ClaimResult,
  type FailoverEvent,
  type FailoverRole,
  type ForgetResult,
  type IdempotencyStore,
  type PeekOptions,
  type PeekResult,
  type StoredResponse,
  StoreError,
  type StoreOperation,
  type StoreReport,
  type StoreStats,
  type WriteOutcome,
} from "../store.ts";
import { claimOptions, durationMs } from "./_shared.ts";
import {
  assertStore,
  knownOptions,
  messageOf,
  optionalBoolean,
  optionalFunction,
} from "../_validate.ts";
import {
  adminMethod,
  bothFailed,
  forgetBoth,
  peekBoth,
} from "./_failover_both.ts";
import { settle } from "./_shared.ts";

export type { FailoverEvent, FailoverRole } from "../store.ts";

/** Options of the {@linkcode FailoverStore} constructor. */
export interface FailoverStoreOptions {
  /** The fast store, such as a `RedisStore`: give it a short timeout. */
  primary: IdempotencyStore;
  /** The durable store, such as a `PostgresStore`. */
  fallback: IdempotencyStore;
  /** Whether a primary miss that the fallback cannot claim is refused,
   * not granted on the primary alone.
   * @default {false} */
  strict?: boolean;
  /** Receives every {@linkcode FailoverEvent}, synchronously; a throw is ignored. */
  onEvent?: (event: FailoverEvent) => void;
}

// Tokens: "p:<primary>", "f:<fallback>", "b:<plen>.<flen>:<primary><fallback>";
// the lengths must add up exactly, so a token cut or extended is malformed.
const B_TOKEN = /^b:(\d{1,6})\.(\d{1,6}):/;

function route(token: unknown): { primary?: string; fallback?: string } | null {
  if (typeof token !== "string" || token.length < 3 || token[1] !== ":") {
    return null;
  }
  if (token[0] === "p") return { primary: token.slice(2) };
  if (token[0] === "f") return { fallback: token.slice(2) };
  const match = token[0] === "b" ? B_TOKEN.exec(token) : null;
  if (match === null) return null;
  const [p, f] = [Number(match[1]), Number(match[2])];
  const start = match[0].length;
  if (p === 0 || f === 0 || token.length !== start + p + f) return null;
  return { primary: token.slice(start, start + p), fallback: token.slice(-f) };
}

function both(primary: string, fallback: string): string {
  return `b:${primary.length}.${fallback.length}:${primary}${fallback}`;
}

/**
 * An {@linkcode IdempotencyStore} on two stores: a primary (such as a
 * `RedisStore`) that serves while it is reachable, and a fallback (such as a
 * `PostgresStore`) that serves while it is not and is consulted on every
 * primary miss, so that a primary outage neither stops the service nor, once
 * the primary is back (possibly empty), lets a retry run a handler twice. It
 * never connects or closes its stores (see `examples/failover.ts`).
 *
 * **Claims.** The primary claims; if it throws, the fallback claims alone
 * (event `fallback`, an `f:` token), and if that throws too, a
 * {@linkcode StoreError}. A primary `completed` is the answer. A primary
 * `in_flight` may be an orphan of an outage, so the fallback claims too: its
 * `completed` is the answer (`recovered`), else the primary's stands. A
 * primary miss claims the fallback (a claim, not a read: the first instance
 * to claim it wins): `acquired` owns both (a `b:` token); `completed` is the
 * answer, copied into the primary when the fingerprints match (`recovered`);
 * `in_flight` is the answer. If the fallback throws, with `strict` or while it
 * has never answered (a claim, or {@linkcode FailoverStore.migrate}), the
 * claim is refused (503: a missing table would look like an endless outage);
 * else it is granted on the primary alone (a `p:` token,
 * `fallback_unavailable`). A claim that the answer does not use is released.
 *
 * **Writes** go to the stores the token names (a malformed token is `lost`);
 * for a `b:` slot, to both at once, and the fallback's answer is the answer
 * (`diverged` when they disagree). When one throws, the other's answer stands
 * (`write_failed`); when both do, a {@linkcode StoreError}.
 *
 * **Costs and limits**: a fresh key costs a claim on each store and a write
 * on both; a replay one primary round trip; in an outage, the primary's
 * timeout. A record completed while the fallback was unreachable is lost if
 * the primary restarts empty; one copied into it gets a new TTL there.
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
  /** Its `onEvent`, then the listeners of {@linkcode FailoverStore.subscribe}. */
  #listeners = new Set<(event: FailoverEvent) => void>();
  #fallbackAnswered = false; // once true, `strict: false` is lenient

  /** Makes a store on two stores; throws a TypeError on a bad or unknown option. */
  constructor(options: FailoverStoreOptions) {
    assertStore("primary", options?.primary);
    knownOptions("FailoverStore", options, FAILOVER_OPTIONS);
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
    const onEvent = optionalFunction("onEvent", options.onEvent);
    if (onEvent !== undefined) this.#listeners.add(onEvent);
  }

  /**
   * Runs the fallback's `migrate()`, then the primary's, where they have one.
   * Run it at boot: it throws when the fallback does not work.
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
      const answered = this.#fallbackAnswered;
      const event = { type: "fallback_unavailable", slot, error } as const;
      const unavailable = { ...event, operation: "claim" } as const;
      if (!answered || this.#strict) {
        await this.#releaseQuietly("primary", slot, first.token);
        if (!answered) this.#emit({ ...unavailable, refused: true });
        throw refused(answered ? STRICT : UNTRUSTED, error);
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
        // Copied only under this claim's fingerprint, which the primary keeps.
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

  /**
   * What a claim would find: the primary's record when it is completed or
   * the fallback has none, else the fallback's; one store's when the other
   * throws (docs/architecture.md, Inspect and forget).
   */
  async peek(slot: string, options?: PeekOptions): Promise<PeekResult> {
    assertSlot(slot);
    return await peekBoth(this.#primary, this.#fallback, slot, options);
  }

  /** Forgets the slot in both stores: `deleted` if either held it; a {@linkcode StoreError} if either threw. */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    return await forgetBoth(this.#primary, this.#fallback, slot);
  }

  /** The fallback's counts: it holds every record written while it answered. */
  async stats(options?: { limit?: number }): Promise<StoreStats> {
    return await adminMethod(this.#fallback, "fallback", "stats")(options);
  }

  /**
   * {@linkcode IdempotencyStore.subscribe}: `listener` gets this store's
   * {@linkcode FailoverEvent}s and is added to both stores' `subscribe()`,
   * where they have one (their `StoreEvent`s).
   */
  subscribe(listener: (event: StoreReport) => void): void {
    if (typeof listener !== "function") {
      throw new TypeError(
        `'listener' must be a function: current value is ${listener}`,
      );
    }
    this.#listeners.add(listener);
    this.#primary.subscribe?.(listener);
    this.#fallback.subscribe?.(listener);
  }

  /** The fallback decides whether a primary `in_flight` stands. */
  async #checkInFlight(
    slot: string,
    options: ClaimOptions,
    first: ClaimResult,
  ) {
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

  /** A claim on the fallback alone, as the primary threw `error`. */
  async #claimFallback(slot: string, options: ClaimOptions, error: unknown) {
    let result: ClaimResult;
    try {
      result = await this.#fallback.claim(slot, options);
      this.#fallbackAnswered = true;
    } catch (fallbackError) {
      throw bothFailed("claim", "claim", error, fallbackError);
    }
    this.#emit({ type: "fallback", operation: "claim", slot, error });
    if (result.state !== "acquired") return result;
    const token = `f:${result.token}`;
    return { state: "acquired", token, recovered: result.recovered } as const;
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
    const failed = (store: FailoverRole, error: unknown) =>
      this.#emit({ type: "write_failed", operation, store, slot, error });
    if (!f.ok) {
      if (p.ok) return failed("fallback", f.error), p.value;
      const what = `${operation} (outcome unknown)`;
      throw bothFailed(operation, what, p.error, f.error);
    }
    if (!p.ok) return failed("primary", p.error), f.value;
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
  #releaseQuietly(role: FailoverRole, slot: string, token: string) {
    const store = role === "primary" ? this.#primary : this.#fallback;
    const release = () => store.release(slot, token);
    return this.#bestEffort("release", role, slot, release);
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
    this.#emit({
      type: "write_failed",
      operation,
      store,
      slot,
      error: result.error,
    });
    return false;
  }

  #emit(event: FailoverEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch { /* a listener's throw changes no answer */ }
    }
  }
}

const FAILOVER_OPTIONS = ["primary", "fallback", "strict", "onEvent"];

const UNTRUSTED =
  "The fallback store has not answered once since this FailoverStore was made, so it is not trusted to be working (run 'await store.migrate()' at boot to create its table)";
const STRICT =
  "The fallback store is unreachable, and 'strict' refuses a claim on the primary alone";

function refused(reason: string, error: unknown): StoreError {
  const message = `${reason}: ${messageOf(error)}`;
  return new StoreError(message, { operation: "claim", cause: error });
}

async function migrateStore(store: IdempotencyStore): Promise<void> {
  const migrate = (store as { migrate?: unknown }).migrate;
  if (typeof migrate === "function") await migrate.call(store);
}
