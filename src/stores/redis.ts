// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A store on Redis (or Redis Cluster) for apps that run many instances:
 * {@linkcode RedisStore}. A claim is one native command (`SET … NX PX ttl
 * GET`); the fenced writes are Lua scripts sent by `EVALSHA` (and by `EVAL`
 * when the server does not know the script, after a restart or `SCRIPT
 * FLUSH`). Leases and deadlines are timed on the server's clock.
 *
 * It takes the client the caller made: an npm `redis` (node-redis 5) client
 * or cluster, an `ioredis` client or cluster, or anything with the one-method
 * {@linkcode RedisCommander} interface (which fits `@db/redis` in three
 * lines). The store never connects, and never closes the client.
 *
 * @example Use a RedisStore with the middleware
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { RedisStore } from "@idempotent/http/redis";
 * import { createClient } from "redis";
 * import { accountOf } from "./auth.ts"; // request => the stable account id
 *
 * const client = await createClient({ url: "redis://127.0.0.1:6379" }).connect();
 * const store = new RedisStore({ client, prefix: "myapp:idem:" });
 * Deno.serve(idempotency(() => new Response("charged", { status: 201 }), {
 *   store,
 *   scope: accountOf, // the caller's account, resolved after authentication
 * }));
 * ```
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
export * from "./_contract.ts";
export type {
  IoRedisClientLike,
  NodeRedisClientLike,
  RedisClientLike,
  RedisCommander,
} from "./_redis_client.ts";

import { assertStoredResponse } from "../_record.ts";
import { positiveInteger } from "../_validate.ts";
import { Orphans } from "./_orphans.ts";
import {
  commander,
  isNoScript,
  isSyntaxError,
  isWrongType,
  mayHaveRun,
  type RedisClientLike,
  type Send,
  text,
  type Wait,
  waiter,
} from "./_redis_client.ts";
import { type StoreCall, StoreCalls } from "./_store_call.ts";
import { decodeClaim, decodeNativeClaim, SCRIPTS } from "./_redis_scripts.ts";
import {
  COMPLETED,
  completedRecord,
  IN_FLIGHT,
  inFlightRecord,
  newToken,
} from "./_redis_record.ts";

/**
 * A Redis connection in subscriber mode: what
 * {@linkcode RedisStoreOptions.subscriber} needs. A node-redis 5 client
 * (`client.duplicate()`, connected) fits as it is.
 */
export interface RedisSubscriberLike {
  /** Subscribes `listener` to `channel`. */
  subscribe(
    channel: string,
    listener: (message: string, channel: string) => void,
  ): Promise<unknown>;
  /** Removes `listener` from `channel` (and unsubscribes when it was the last). */
  unsubscribe(
    channel: string,
    listener: (message: string, channel: string) => void,
  ): Promise<unknown>;
}

/**
 * What `waitForChange()` reads once subscribed: "f" for an in-flight record
 * (of either layout), -1 for a value that is not ours, anything else for an
 * absent or completed one.
 */
const STATE_SCRIPT = `local r = redis.pcall('GETRANGE', KEYS[1], 0, 5)
if type(r) == 'table' then
  r = redis.pcall('HGET', KEYS[1], 'st')
  if type(r) == 'table' then return -1 end
  return r
end
if r == '${IN_FLIGHT}' then return 'f' end
if r == '' or r == '${COMPLETED}' then return 'c' end
return -1`;
/** {@linkcode STATE_SCRIPT}'s reply for a key of another type. */
const UNREADABLE = -1;

/** Options of the {@linkcode RedisStore} constructor. */
export interface RedisStoreOptions {
  /**
   * A connected client: node-redis 5 (client or cluster), ioredis (client or
   * cluster), or a {@linkcode RedisCommander}. The caller owns it and closes
   * it; the store never does.
   */
  client: RedisClientLike;
  /**
   * What every key starts with: a record lives at `prefix + slot`.
   *
   * @default {"idempotency:"}
   */
  prefix?: string;
  /**
   * How long each operation may wait for Redis, in milliseconds, before it
   * throws a {@linkcode StoreError}. Covers the `EVAL` retry after a
   * `NOSCRIPT`.
   *
   * @default {2000}
   */
  timeoutMs?: number;
  /**
   * A connection in subscriber mode (node-redis 5: `await
   * client.duplicate().connect()`; an ioredis one wrapped to this
   * interface), for `waitForInFlight`: with it, the store gains
   * {@linkcode RedisStore.waitForChange}, every applied `complete` and
   * `release` is followed by a `PUBLISH` on the slot's key (sent without
   * waiting for it), and a duplicate waiting in another instance is woken
   * by it instead of polling. The caller owns it and closes it. One
   * subscription per waited-for slot, shared by its waiters.
   *
   * @default {undefined} (waiters poll)
   */
  subscriber?: RedisSubscriberLike;
  /**
   * How many replicas must acknowledge a claim that acquires a slot, and a
   * completion that applies, before the store answers: after each of these
   * writes it sends `WAIT waitReplicas waitTimeoutMs` on the connection that
   * wrote (on a cluster, to the key's master). Redis replicates
   * asynchronously, so a failover can lose a write its master acknowledged:
   * a lost claim lets a second request run the key, a lost completion lets it
   * run again once the lease is over. With `waitReplicas`, a write the store
   * reported is on that many replicas, which a failover promotes from. When
   * fewer acknowledge within `waitTimeoutMs`, the operation throws a
   * {@linkcode StoreError} (outcome unknown): a claim answers 503 and is
   * undone by its token; the middleware retries a completion. `0` sends no
   * `WAIT`. A {@linkcode RedisCommander} gets `["WAIT", n, ms]` and must
   * send it on the connection that made the write.
   *
   * @default {0}
   */
  waitReplicas?: number;
  /**
   * How long each `WAIT` may block, in milliseconds (see `waitReplicas`).
   *
   * @default {500}
   */
  waitTimeoutMs?: number;
}

/**
 * An {@linkcode IdempotencyStore} on Redis: one key per slot (so Redis
 * Cluster works), one string per record, every operation one round trip but
 * for a claim that finds the slot in flight (two).
 *
 * - A claim is the native `SET key <in-flight record> NX PX ttl GET`, no
 *   script: Redis answers nil when it took the free slot, or the value that
 *   holds it. A completed record is the replay, decoded in place (the body a
 *   view into the reply). Anything else (a claim in flight, whose lease only
 *   a script can judge, or a value that is not ours) goes on to the claim
 *   script, which answers in flight, takes an expired lease over
 *   (`recovered: true`), or reads the value as unreadable. On a server
 *   without `SET … NX … GET` (Redis 6.x) every claim is the script. Redis
 *   6.0 is the least it needs (`SET … KEEPTTL`).
 * - `complete`, `release` and `extend` are Lua scripts, fenced by the
 *   claim's token, sent with `EVALSHA`, and again with `EVAL` when Redis
 *   answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).
 * - The deadline is the key's expiry (`PX ttl` at the claim; every later
 *   write keeps it), and the lease is told by the key's remaining time too:
 *   both are on the server's clock, so instances with skewed clocks agree,
 *   and a record past its deadline is absent.
 * - A claim answers a completed record whole, body included: a replay needs
 *   no second trip. Bodies are stored as raw bytes.
 * - A value at the key that is not a record of ours (another type, a string
 *   of another layout or version, a record cut short) reads as `in_flight`
 *   with `fingerprint: null` and is never overwritten: no exception on the
 *   request path, and never a second execution. Records of the first layout
 *   (a hash per slot, written by 0.1) are still read: replayed when
 *   completed, in flight until their lease ends.
 * - On Redis Cluster every operation touches one key, routed by the client.
 *   A failover may lose a write its master acknowledged (replication is
 *   asynchronous); `waitReplicas` makes the store confirm each claim and
 *   completion on that many replicas with `WAIT` before it answers.
 * - Every operation has `timeoutMs` to finish; an error from the client
 *   (unreachable, closed) or a missed deadline throws a {@linkcode StoreError}
 *   with the cause. After a thrown write the outcome is unknown.
 * - **A claim that failed leaves nothing behind.** A claim that timed out
 *   may still run later: node-redis and ioredis queue commands while
 *   disconnected and send them on reconnect, and a hung Redis (SIGSTOP, a
 *   long fork) already holds the command. The store made the claim's token,
 *   so it undoes such a claim itself: when the late reply says the claim
 *   acquired the slot, or the connection broke under it (outcome unknown),
 *   it sends a `release` fenced by that token, which deletes the record only
 *   if that very claim holds it. A late reply that found the slot taken or
 *   completed needs nothing; a claim the client refused to send (offline,
 *   closed) or that met `NOSCRIPT` never ran. A late claim carries our own
 *   token, so it can never be taken for someone else's; if it took over an
 *   expired lease (`recovered`), undoing it frees the slot, as a release
 *   after the takeover would have. The release goes on the same client after
 *   the claim's reply, retried with a backoff (100 ms to 5 s) and at once
 *   when Redis answers anything, until it answers or the orphan's lease has
 *   run out. What remains: a claim whose reply never comes back (the client
 *   dropped it, or the process exits) lives at most one lease, as does one
 *   past the bound of 10,000 pending undos per store (oldest dropped first).
 *   The undo emits nothing (stores have no events). Late writes need no
 *   undo: a late `complete` is the write that was wanted, and a late
 *   `release` or `extend` is fenced by the owner's token.
 *
 * **The client's offline queue.** `disableOfflineQueue: true` (node-redis;
 * `enableOfflineQueue: false` on ioredis) makes a command fail at once while
 * the client is disconnected: a claim then answers 503 (or falls back, in a
 * `FailoverStore`) without waiting `timeoutMs`, and cannot land after a
 * reconnect. It does not stop a command already written to a Redis that
 * hangs, or to a connection that breaks, from running later; the undo above
 * covers both, with or without the queue. With the queue, a blip shorter
 * than `timeoutMs` costs no 503; without it, every request during a
 * reconnect fails fast. Either is safe: the queue suits a lone RedisStore,
 * no queue a `FailoverStore` primary, where failing fast lets the fallback
 * take over.
 *
 * On workerd it needs the `nodejs_compat` flag: it imports `node:buffer` and
 * `node:crypto`, and the drivers need `node:net`.
 *
 * The caller opens and closes the client; the store never does. Deadlines are
 * watched by one timer per store (not one per command), which keeps the
 * process alive only while operations are pending and stops by itself at most
 * `timeoutMs` after the last one: there is nothing to dispose.
 *
 * @example Claim, complete and replay on node-redis
 * ```ts ignore
 * import { RedisStore } from "@idempotent/http/redis";
 * import { createClient } from "redis";
 * import assert from "node:assert/strict";
 *
 * const client = await createClient({ url: "redis://127.0.0.1:6379" }).connect();
 * const store = new RedisStore({ client, prefix: "example:" });
 * const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 86_400_000 };
 * const claim = await store.claim("slot-1", options);
 * assert.equal(claim.state, "acquired");
 * if (claim.state === "acquired") {
 *   const body = new TextEncoder().encode("done");
 *   assert.equal(await store.complete("slot-1", claim.token, { status: 201, headers: [], body }), "applied");
 * }
 * assert.equal((await store.claim("slot-1", options)).state, "completed");
 * client.destroy();
 * ```
 *
 * @example Any client with `sendCommand(args)` works (here a stub answering "free")
 * ```ts
 * import { RedisStore, type RedisCommander } from "@idempotent/http/redis";
 * import assert from "node:assert/strict";
 *
 * const sent: string[] = [];
 * const client: RedisCommander = {
 *   sendCommand(args) {
 *     sent.push(String(args[0]));
 *     return Promise.resolve(null); // SET … NX GET's "the key was free"
 *   },
 * };
 * const store = new RedisStore({ client });
 * const claim = await store.claim("slot-1", { fingerprint: "f", leaseMs: 1000, ttlMs: 60_000 });
 * assert.equal(claim.state, "acquired");
 * assert.deepEqual(sent, ["SET"]);
 * ```
 */
export class RedisStore implements IdempotencyStore {
  #send: Send;
  #wait: Wait;
  #subscriber: RedisSubscriberLike | undefined;
  /**
   * With a `subscriber`: resolves when the slot may have changed (see
   * {@linkcode IdempotencyStore.waitForChange}), at the `PUBLISH` that
   * follows a `complete` or `release` of the slot by any store with a
   * subscriber; rejects when the subscription fails. Without one it is
   * `undefined`, and waiters poll.
   */
  readonly waitForChange?: (slot: string, signal: AbortSignal) => Promise<void>;
  #prefix: string;
  #waitReplicas: number;
  #waitTimeoutMs: number;
  #waits: StoreCalls;
  #orphans = new Orphans((slot, token) => this.release(slot, token));
  #calls: StoreCalls;
  /** Whether the server takes `SET … NX … GET` (Redis 7.0 and later). */
  #native = true;

  /**
   * Makes a store on a client the caller connected.
   *
   * @param options The client, the key prefix and the timeout.
   * @throws {TypeError} When `client` is none of the supported shapes, or
   * `prefix` is not a string.
   * @throws {RangeError} When `timeoutMs` is not a positive integer.
   */
  constructor(options: RedisStoreOptions) {
    this.#send = commander(options?.client);
    const prefix = options.prefix ?? "idempotency:";
    if (typeof prefix !== "string") {
      throw new TypeError(
        `'prefix' must be a string: current value is ${prefix}`,
      );
    }
    this.#prefix = prefix;
    const timeoutMs = positiveInteger("timeoutMs", options.timeoutMs ?? 2000);
    this.#calls = new StoreCalls(timeoutMs, this.#orphans, {
      failed: (operation, cause) =>
        new StoreError(`Redis ${operation} failed: ${message(cause)}`, {
          operation,
          cause,
        }),
      timedOut: (operation) =>
        new StoreError(
          `Redis ${operation} did not answer within ${timeoutMs} ms`,
          { operation, cause: new Error(`Timed out after ${timeoutMs} ms`) },
        ),
    });
    this.#wait = waiter(options.client, this.#send);
    const subscriber = options.subscriber;
    if (subscriber !== undefined) {
      if (
        typeof subscriber?.subscribe !== "function" ||
        typeof subscriber.unsubscribe !== "function"
      ) {
        throw new TypeError(
          `'subscriber' must have subscribe() and unsubscribe(): current value is ${subscriber}`,
        );
      }
      this.#subscriber = subscriber;
      this.waitForChange = (slot, signal) => this.#changed(slot, signal);
    }
    const replicas = options.waitReplicas ?? 0;
    this.#waitReplicas = replicas === 0
      ? 0
      : positiveInteger("waitReplicas", replicas);
    this.#waitTimeoutMs = positiveInteger(
      "waitTimeoutMs",
      options.waitTimeoutMs ?? 500,
    );
    // WAIT blocks up to waitTimeoutMs on the server; a hung connection gets
    // timeoutMs more.
    const wait = `WAIT ${this.#waitReplicas}`;
    const waitFailed = (operation: StoreOperation, cause: unknown) =>
      new StoreError(`Redis ${operation} failed: ${wait}: ${message(cause)}`, {
        operation,
        cause,
      });
    this.#waits = new StoreCalls(
      this.#waitTimeoutMs + timeoutMs,
      this.#orphans,
      {
        failed: waitFailed,
        timedOut: (operation) =>
          waitFailed(
            operation,
            new Error(
              `WAIT did not answer within ${this.#waitTimeoutMs} ms and more`,
            ),
          ),
      },
    );
  }

  /**
   * Reserves `slot` if it is free (absent, past its deadline, or in flight
   * past its lease, which answers `recovered: true` and opens a new TTL
   * window), or reports what holds it. One round trip; a completed record
   * comes back whole.
   *
   * @param slot The slot, at most 256 bytes.
   * @param options The fingerprint, lease and TTL of the claim.
   * @returns What the claim found.
   * @throws {TypeError} When `slot` is empty or longer than 256 bytes, or the
   * fingerprint is not a string.
   * @throws {RangeError} When `leaseMs` or `ttlMs` is not a positive number.
   * @throws {StoreError} When Redis cannot be reached or does not answer in
   * time.
   */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    const token = newToken(fingerprint);
    const key = this.#prefix + slot;
    const record = inFlightRecord(token, leaseMs, ttlMs);
    const ttl = String(ttlMs);
    const result = await this.#calls.run(
      "claim",
      async (call) => {
        if (this.#native) {
          try {
            const reply = await this.#send(
              ["SET", key, record, "NX", "PX", ttl, "GET"],
            );
            // Nil (acquired) or a completed record is final; anything
            // else only the claim script can judge.
            const found = decodeNativeClaim(reply, token);
            if (found !== undefined) return found;
          } catch (error) {
            // The SET wrote nothing: a first-layout hash (WRONGTYPE), or a
            // server before 7.0, which gets the script from then on.
            if (isSyntaxError(error)) this.#native = false;
            else if (!isWrongType(error)) throw error;
          }
          call.throwIfExpired();
        }
        const argv = [record, ttl, String(leaseMs)];
        const reply = await this.#script(call, "claim", key, argv);
        return decodeClaim(reply, token, leaseMs);
      },
      {
        slot,
        token,
        leaseMs,
        acquired: (found) => found.state === "acquired" ? token : undefined,
        mayHaveRun,
      },
    );
    if (result.state === "acquired" && this.#waitReplicas > 0) {
      try {
        await this.#replicated("claim", slot);
      } catch (error) {
        // The claim holds the slot on the master: undo it by its token.
        this.#orphans.undo(slot, token, leaseMs);
        throw error;
      }
    }
    return result;
  }

  /**
   * Records `response` as the slot's answer, if `token` still owns the slot
   * (in flight under this token, before its deadline). Keeps the deadline.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param response The response to replay.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` or `response` is malformed.
   * @throws {StoreError} When the outcome is unknown.
   */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    assertStoredResponse(response);
    token = String(token);
    // A token too short to carry a fingerprint was never one of ours.
    const record = completedRecord(token, response);
    if (record === null) return "lost";
    const reply = await this.#eval("complete", slot, [token, record]);
    if (reply !== 1) return "lost";
    if (this.#waitReplicas > 0) await this.#replicated("complete", slot);
    this.#publish(slot);
    return "applied";
  }

  /**
   * Deletes the slot, if `token` still owns it.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` is malformed.
   * @throws {StoreError} When the outcome is unknown.
   */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    const reply = await this.#eval("release", slot, [String(token)]);
    if (reply !== 1) return "lost";
    this.#publish(slot);
    return "applied";
  }

  /** With a subscriber: tells waiters the slot changed, without waiting. */
  #publish(slot: string): void {
    if (this.#subscriber === undefined) return;
    this.#send(["PUBLISH", this.#prefix + slot, "1"]).catch(() => {});
  }

  #changed(slot: string, signal: AbortSignal): Promise<void> {
    assertSlot(slot);
    const subscriber = this.#subscriber!;
    const channel = this.#prefix + slot;
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return resolve();
      let done = false;
      const end = () => {
        if (done) return;
        done = true;
        signal.removeEventListener("abort", end);
        subscriber.unsubscribe(channel, listener).catch(() => {});
        resolve();
      };
      const listener = () => end();
      const fail = (error: unknown) => {
        if (done) return;
        done = true;
        signal.removeEventListener("abort", end);
        subscriber.unsubscribe(channel, listener).catch(() => {});
        reject(error);
      };
      signal.addEventListener("abort", end, { once: true });
      // Subscribed first, then one look: a change before the subscription
      // is seen by the look, one after it by the subscription.
      subscriber.subscribe(channel, listener).then(async () => {
        if (done) return;
        const state = await this.#send(["EVAL", STATE_SCRIPT, "1", channel]);
        // Absent or completed: at once; in flight or unreadable: the PUBLISH.
        if (text(state) !== "f" && state !== UNREADABLE) end();
      }).catch(fail);
    });
  }

  /**
   * Renews the lease to `leaseMs` from now on the server's clock, if `token`
   * still owns the slot. Keeps the deadline.
   *
   * @param slot The slot.
   * @param token The token of the claim.
   * @param leaseMs The new lease, from now.
   * @returns `applied`, or `lost` when the token no longer owns the slot.
   * @throws {TypeError} When `slot` is malformed.
   * @throws {RangeError} When `leaseMs` is not a positive number.
   * @throws {StoreError} When the outcome is unknown.
   */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    const lease = String(durationMs("leaseMs", leaseMs));
    const reply = await this.#eval("extend", slot, [String(token), lease]);
    return reply === 1 ? "applied" : "lost";
  }

  /**
   * Sends `WAIT` after a write to the slot's key and throws a
   * {@linkcode StoreError} unless `waitReplicas` replicas acknowledged it
   * within `waitTimeoutMs` (bounded by `timeoutMs` more, should the
   * connection hang).
   */
  async #replicated(operation: StoreOperation, slot: string): Promise<void> {
    const key = this.#prefix + slot;
    const replicas = String(this.#waitReplicas);
    const timeout = String(this.#waitTimeoutMs);
    const count = await this.#waits.run(
      operation,
      () => this.#wait(key, replicas, timeout),
    );
    if (Number(count) < this.#waitReplicas) {
      throw new StoreError(
        `Redis ${operation} was acknowledged by ${count} of ${this.#waitReplicas} replicas within ${this.#waitTimeoutMs} ms`,
        { operation, cause: new Error(`WAIT answered ${count}`) },
      );
    }
  }

  /** Runs the script of a fenced write on the slot's key, within the deadline. */
  #eval(
    operation: StoreOperation,
    slot: string,
    argv: (string | Uint8Array)[],
  ): Promise<unknown> {
    const key = this.#prefix + slot;
    return this.#calls.run(
      operation,
      (call) => this.#script(call, operation, key, argv),
    );
  }

  /**
   * Sends the script of `operation` by `EVALSHA`, and by `EVAL` when Redis
   * does not know it (after a restart or `SCRIPT FLUSH`).
   */
  async #script(
    call: StoreCall,
    operation: StoreOperation,
    key: string,
    argv: (string | Uint8Array)[],
  ): Promise<unknown> {
    const { sha, source } = SCRIPTS[operation];
    try {
      return await this.#send(["EVALSHA", sha, "1", key, ...argv]);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      call.throwIfExpired();
      return await this.#send(["EVAL", source, "1", key, ...argv]);
    }
  }
}

/** An error's message, or the error itself when it has none. */
function message(error: unknown): unknown {
  return (error as { message?: unknown } | null)?.message ?? error;
}
