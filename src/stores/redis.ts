// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode RedisStore}, the store on Redis or Redis Cluster for apps that
 * run many instances, and the client interfaces it takes.
 *
 * @module
 */

import {
  assertSlot,
  type ClaimOptions,
  type ClaimResult,
  type ForgetResult,
  type IdempotencyStore,
  type PeekOptions,
  type PeekResult,
  type StoredResponse,
  StoreError,
  type StoreEvent,
  type StoreOperation,
  type StoreStats,
  type WriteOutcome,
} from "../store.ts";
import { claimOptions, durationMs } from "./_shared.ts";
export type {
  IoRedisClientLike,
  NodeRedisClientLike,
  RedisClientLike,
  RedisCommander,
} from "./_redis_client.ts";

import { Buffer } from "node:buffer";
import { assertStoredResponse } from "../_record.ts";
import { SealCount } from "../_seal.ts";
import {
  knownOptions,
  needsOption,
  optionalFunction,
  positiveInteger,
  positiveMs,
} from "../_validate.ts";
import type { Orphans } from "./_orphans.ts";
import {
  callFailure,
  commander,
  connectionHint,
  mayHaveRun,
  type RedisClientLike,
  refusal,
  type Send,
  text,
  type Wait,
  waiter,
  waitErrors,
} from "./_redis_client.ts";
import {
  claimReply,
  completedClaim,
  peekReply,
  SCRIPTS,
  STATE_REPLY,
  statsReply,
  WRITE_REPLY,
} from "./_redis_scripts.ts";
import { completedRecord, inFlightRecord, newToken } from "./_redis_record.ts";
import {
  type Operation,
  serviceCalls,
  type StoreCall,
  StoreCalls,
  timeoutOption,
} from "./_store_call.ts";

/**
 * A connection in subscriber mode, for {@linkcode RedisStoreOptions.subscriber}:
 * a node-redis 5 client (`client.duplicate()`, connected) fits as it is.
 */
export interface RedisSubscriberLike {
  /** Subscribes `listener` to `channel`. */
  subscribe(
    channel: string,
    listener: (message: string, channel: string) => void,
  ): Promise<unknown>;
  /** Removes `listener` from `channel` (unsubscribing after the last). */
  unsubscribe(
    channel: string,
    listener: (message: string, channel: string) => void,
  ): Promise<unknown>;
}

/** Options of the {@linkcode RedisStore} constructor. */
export interface RedisStoreOptions {
  /** A connected client (see {@linkcode RedisStore}); the caller owns it. */
  client: RedisClientLike;
  /**
   * What every key starts with: a record lives at `prefix + slot`.
   * @default {"idempotency:"}
   */
  prefix?: string;
  /**
   * How long each operation may wait for Redis: a positive integer of
   * milliseconds, or `Infinity` for no deadline.
   * @default {2000}
   */
  timeoutMs?: number;
  /**
   * A connection in subscriber mode: each applied `complete` and `release`
   * then `PUBLISH`es on the slot's key, waking waiters in every instance
   * (`waitForInFlight`) instead of polling. The caller owns it.
   * @default {undefined} (waiters poll)
   */
  subscriber?: RedisSubscriberLike;
  /**
   * How many replicas must acknowledge (`WAIT`) a claim that acquires and a
   * completion that applies (see {@linkcode RedisStore}).
   * @default {0} (no `WAIT`)
   */
  waitReplicas?: number;
  /**
   * How long each `WAIT` may block, in milliseconds (only with `waitReplicas`).
   * @default {500}
   */
  waitTimeoutMs?: number;
  /**
   * Receives each {@linkcode StoreEvent}: the end of each undo of a claim
   * that failed but may have landed; a throw is ignored.
   * @default {undefined}
   */
  onEvent?: (event: StoreEvent) => void;
}

const REDIS_OPTIONS =
  "client prefix timeoutMs subscriber waitReplicas waitTimeoutMs onEvent"
    .split(" ");

/**
 * An {@linkcode IdempotencyStore} on Redis 6.0 or later, or Redis Cluster:
 * one string key per slot, each operation one round trip on its key (a claim
 * is `SET … NX PX ttl GET`; a record in flight, or Redis before 7.0, adds a
 * Lua script), the writes fenced by the token, deadline and lease the key's
 * expiry on the server's clock. A value that is not a record of ours reads
 * as in flight and is never overwritten.
 *
 * - `client`: a connected node-redis 5 or ioredis client or cluster, as it
 *   is (`new RedisStore({ client: await createClient().connect() })`); any
 *   other, such as `@db/redis`, through a {@linkcode RedisCommander}. The
 *   store never connects or closes it. On workerd: `nodejs_compat`.
 * - An operation throws a {@linkcode StoreError} when Redis fails or misses
 *   `timeoutMs` (a write's outcome then unknown; a claim is undone). The
 *   client's offline queue lets a blip shorter than `timeoutMs` cost no 503;
 *   without it (node-redis `disableOfflineQueue`, ioredis
 *   `enableOfflineQueue: false`) a claim fails at once while disconnected,
 *   as suits a `FailoverStore` primary.
 * - Redis replicates asynchronously: a failover can lose a write its master
 *   acknowledged. `waitReplicas: n` sends `WAIT n waitTimeoutMs` on the
 *   connection that wrote (a `RedisCommander` gets `["WAIT", n, ms]` and
 *   must do the same) after a claim that acquires and a completion that
 *   applies, and throws (a claim undone) when fewer acknowledge.
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
  #prefix: string;
  #subscriber: RedisSubscriberLike | undefined;
  #replicas: number;
  #waitMs: number;
  #orphans: Orphans;
  #calls: StoreCalls;
  #waits: StoreCalls;
  /** Whether the server takes `SET … NX … GET` (Redis 7.0 and later). */
  #native = true;
  /** With a `subscriber`: resolves at the slot's next `PUBLISH`. */
  readonly waitForChange?: (slot: string, signal: AbortSignal) => Promise<void>;

  /**
   * Makes a store on a client the caller connected (or will connect before
   * serving: a command that fails on a client not connected says so).
   * @throws {TypeError} When `client`, `prefix` or `subscriber` is malformed,
   * an option is unknown, or `waitTimeoutMs` is given without `waitReplicas`.
   * @throws {RangeError} When a number option is not a positive integer
   * (`timeoutMs` may also be `Infinity`).
   */
  constructor(options: RedisStoreOptions) {
    const client = options?.client;
    this.#send = commander(client);
    knownOptions("RedisStore", options, REDIS_OPTIONS);
    const onEvent = optionalFunction("onEvent", options.onEvent);
    const prefix = options.prefix ?? "idempotency:";
    if (typeof prefix !== "string") {
      throw new TypeError(
        `'prefix' must be a string: current value is ${prefix}`,
      );
    }
    this.#prefix = prefix;
    const timeoutMs = timeoutOption(options.timeoutMs, 2000);
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
    this.#replicas = replicas === 0
      ? 0
      : positiveInteger("waitReplicas", replicas);
    const waitMs = options.waitTimeoutMs ?? 500;
    this.#waitMs = positiveMs("waitTimeoutMs", waitMs);
    needsOption(
      "waitTimeoutMs",
      options.waitTimeoutMs !== undefined,
      "'waitReplicas' above 0",
      this.#replicas > 0,
    );
    this.#wait = waiter(client, this.#send, this.#replicas, this.#waitMs);
    const hint = connectionHint(client);
    ({ calls: this.#calls, orphans: this.#orphans } = serviceCalls({
      service: "Redis",
      timeoutMs,
      onEvent,
      release: (slot, token) => this.release(slot, token),
      failed: callFailure(hint),
      hint: () => hint(true),
    }));
    // WAIT blocks up to waitTimeoutMs, then gets timeoutMs like any call.
    const waits = waitErrors(hint, this.#replicas, this.#waitMs);
    this.#waits = new StoreCalls(
      this.#waitMs + timeoutMs,
      this.#orphans,
      waits,
    );
  }

  /** Reserves `slot` if it is free, or reports what holds it. */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    const token = newToken(fingerprint);
    const key = this.#prefix + slot;
    const record = inFlightRecord(token, leaseMs, ttlMs);
    const ttl = String(ttlMs);
    const set = ["SET", key, record, "NX", "PX", ttl, "GET"];
    const claimed = async (call: StoreCall): Promise<ClaimResult> => {
      if (this.#native) {
        try {
          const reply = await this.#send(set);
          if (reply === null) {
            return { state: "acquired", token, recovered: false };
          }
          const completed = completedClaim(reply);
          if (completed !== null) return completed;
          // In flight (only a script can judge its lease), or not ours.
        } catch (error) {
          // Nothing written: Redis before 7.0 (the script from then on), or
          // a key of another type.
          const refused = refusal(error);
          if (refused === "ERR syntax error") this.#native = false;
          else if (refused !== "WRONGTYPE") throw error;
        }
        call.throwIfExpired();
      }
      const argv = [record, ttl, String(leaseMs)];
      const reply = await this.#script(call, "claim", [key], argv);
      return claimReply(reply, token, leaseMs);
    };
    const result = await this.#calls.run("claim", claimed, {
      slot,
      token,
      leaseMs,
      acquired: (found) => found.state === "acquired" ? token : undefined,
      mayHaveRun,
    });
    if (result.state === "acquired" && this.#replicas > 0) {
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

  /** Records `response` if `token` still owns the slot. */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    assertStoredResponse(response);
    token = String(token);
    const record = completedRecord(token, response);
    if (record === null) return "lost";
    const reply = await this.#eval("complete", slot, [token, record]);
    if (reply !== WRITE_REPLY.APPLIED) return "lost";
    if (this.#replicas > 0) await this.#replicated("complete", slot);
    this.#publish(slot);
    return "applied";
  }

  /** Deletes the slot if `token` still owns it. */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    const reply = await this.#eval("release", slot, [String(token)]);
    if (reply !== WRITE_REPLY.APPLIED) return "lost";
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
      const end = (failed = false, error?: unknown) => {
        if (done) return;
        done = true;
        signal.removeEventListener("abort", changed);
        subscriber.unsubscribe(channel, changed).catch(() => {});
        if (failed) reject(error);
        else resolve();
      };
      const changed = () => end();
      signal.addEventListener("abort", changed, { once: true });
      // Subscribed first, then one look: a change before the subscription
      // is seen by the look, one after it by the subscription.
      subscriber.subscribe(channel, changed).then(async () => {
        if (done) return;
        const { source } = SCRIPTS.state;
        const state = await this.#send(["EVAL", source, "1", channel]);
        if (state !== STATE_REPLY.HELD) end();
      }).catch((error) => end(true, error));
    });
  }

  /** Renews the lease to `leaseMs` from now if `token` owns the slot. */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    const lease = String(durationMs("leaseMs", leaseMs));
    const reply = await this.#eval("extend", slot, [String(token), lease]);
    return reply === WRITE_REPLY.APPLIED ? "applied" : "lost";
  }

  /**
   * {@linkcode IdempotencyStore.peek}: one script reads the key, its `PTTL`
   * and the server's `TIME`, and writes nothing (on a cluster too: one key).
   * Redis keeps no claim time: `claimedAt` is `null`.
   */
  async peek(slot: string, options?: PeekOptions): Promise<PeekResult> {
    assertSlot(slot);
    const reply = await this.#eval("peek", slot, []);
    return peekReply(reply, options?.response === true);
  }

  /** {@linkcode IdempotencyStore.forget}: `DEL`s the slot's key (its only key), waking its waiters. */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    const deleted = Number(await this.#eval("forget", slot, [])) === 1;
    // Waiters in other instances may subscribe though this store does not.
    if (deleted) {
      this.#send(["PUBLISH", this.#prefix + slot, "1"]).catch(() => {});
    }
    return deleted ? "deleted" : "absent";
  }

  /**
   * {@linkcode IdempotencyStore.stats} by `SCAN` of the prefix, then a script
   * that counts each batch by its head: at most `limit` keys (10,000 by
   * default), `exact: false` when it stopped there. A scan walks the whole
   * keyspace: not for a hot path. Redis Cluster is not supported (a scan
   * sees one node): a `TypeError`.
   */
  async stats(options?: { limit?: number }): Promise<StoreStats> {
    const limit = positiveInteger("limit", options?.limit ?? 10_000);
    const info = await this.#calls.run(
      "stats",
      () => this.#send(["INFO", "cluster"]),
    );
    if (/cluster_enabled:1/.test(text(info) ?? "")) {
      throw new TypeError(
        "RedisStore.stats() does not support Redis Cluster: a SCAN sees one node (count on each master with SCAN, or peek at the keys you know)",
      );
    }
    const match = this.#prefix.replace(/[*?[\]\\]/g, "\\$&") + "*";
    const keys = new Map<string, Uint8Array | string>();
    let cursor = "0";
    let exact = true;
    do {
      const scan = ["SCAN", cursor, "MATCH", match, "COUNT", "1000"];
      const reply = await this.#calls.run("stats", () => this.#send(scan));
      const [next, found] = Array.isArray(reply) ? reply : [];
      cursor = text(next) ?? "0";
      for (const key of Array.isArray(found) ? found : []) {
        const id = typeof key === "string"
          ? key
          : Buffer.from(key).toString("latin1");
        if (keys.size >= limit && !keys.has(id)) exact = false;
        else keys.set(id, key);
      }
    } while (cursor !== "0" && exact);
    const counts = [0, 0, 0];
    const sealed = new SealCount();
    const all = [...keys.values()];
    for (let i = 0; i < all.length; i += 500) {
      const batch = all.slice(i, i + 500);
      const reply = await this.#calls.run(
        "stats",
        (call) => this.#script(call, "stats", batch, []),
      );
      statsReply(reply, sealed).forEach((n, j) => counts[j]! += n);
    }
    const [inFlight = 0, completed = 0, unreadable = 0] = counts;
    return { inFlight, completed, unreadable, exact, ...sealed.counts };
  }

  /** {@linkcode IdempotencyStore.subscribe}: the end of each undo ({@linkcode StoreEvent}). */
  subscribe(listener: (event: StoreEvent) => void): void {
    this.#orphans.subscribe(listener);
  }

  /** Throws unless `waitReplicas` replicas acknowledged the slot's write. */
  async #replicated(operation: StoreOperation, slot: string): Promise<void> {
    const key = this.#prefix + slot;
    const count = await this.#waits.run(operation, () => this.#wait(key));
    if (Number(count) < this.#replicas) {
      throw new StoreError(
        `Redis ${operation} was acknowledged by ${count} of ${this.#replicas} replicas within ${this.#waitMs} ms`,
        { operation, cause: new Error(`WAIT answered ${count}`) },
      );
    }
  }

  /** Runs a fenced write's script on the slot's key, within the deadline. */
  #eval(op: Operation, slot: string, argv: Argv): Promise<unknown> {
    const key = this.#prefix + slot;
    return this.#calls.run(op, (call) => this.#script(call, op, [key], argv));
  }

  /** `EVALSHA` of the script, or `EVAL` when Redis lacks it (restarted). */
  async #script(
    call: StoreCall,
    operation: Operation,
    keys: Argv,
    argv: Argv,
  ): Promise<unknown> {
    const { sha, source } = SCRIPTS[operation];
    const n = String(keys.length);
    try {
      return await this.#send(["EVALSHA", sha, n, ...keys, ...argv]);
    } catch (error) {
      if (refusal(error) !== "NOSCRIPT") throw error;
      call.throwIfExpired();
      return await this.#send(["EVAL", source, n, ...keys, ...argv]);
    }
  }
}

type Argv = (string | Uint8Array)[];
