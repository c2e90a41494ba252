// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A store on Redis (or Redis Cluster) for apps that run many instances:
 * {@linkcode RedisStore}. Every operation is one round trip, a Lua script
 * sent by `EVALSHA` (and by `EVAL` when the server does not know the script,
 * after a restart or `SCRIPT FLUSH`), timed on the server's clock.
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
 *
 * const client = await createClient({ url: "redis://127.0.0.1:6379" }).connect();
 * const store = new RedisStore({ client, prefix: "myapp:idem:" });
 * Deno.serve(idempotency(() => new Response("charged", { status: 201 }), { store }));
 * ```
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import {
  assertSlot,
  type ClaimOptions,
  type ClaimResult,
  type IdempotencyStore,
  type StoredResponse,
  StoreError,
  type StoreOperation,
  type WriteOutcome,
} from "../store.ts";
export * from "./_contract.ts";

import {
  assertStoredResponse,
  decodeHeaders,
  encodeHeaders,
  RECORD_VERSION,
  toStoredResponse,
} from "../record.ts";
import { positiveInteger } from "../_validate.ts";
import { Orphans } from "./_orphans.ts";

/**
 * The one-method client interface the store talks to: send one command as an
 * array of arguments, get its reply.
 *
 * The reply must be what Redis answered, decoded the usual way: a bulk string
 * as a `Uint8Array` (or a `string`, which loses binary bodies: ask your client
 * for bytes), an integer as a `number`, a nil as `null`, an array as an array.
 * An error reply rejects the promise with an `Error` whose message starts with
 * the error code (such as `NOSCRIPT`), optionally after a `-`.
 *
 * node-redis and ioredis clients need no adapter: pass them as they are.
 *
 * @example Adapt a `@db/redis` client
 * ```ts
 * import type { RedisCommander } from "@idempotent/http/redis";
 *
 * // The shape of @db/redis's `Redis` that the adapter uses.
 * interface DbRedis {
 *   sendCommand(
 *     command: string,
 *     args?: (string | number | Uint8Array)[],
 *     options?: { returnUint8Arrays?: boolean },
 *   ): Promise<unknown>;
 * }
 *
 * function fromDbRedis(redis: DbRedis): RedisCommander {
 *   return {
 *     sendCommand: ([command, ...args]) =>
 *       redis.sendCommand(command as string, args, { returnUint8Arrays: true }),
 *   };
 * }
 *
 * // new RedisStore({ client: fromDbRedis(await connect({ hostname: "127.0.0.1" })) })
 * ```
 */
export interface RedisCommander {
  /**
   * Sends one command and resolves with its reply.
   *
   * @param args The command's name, then its arguments.
   * @returns The reply.
   */
  sendCommand(args: (string | Uint8Array)[]): Promise<unknown>;
}

/**
 * The part of a node-redis 5 client (`createClient()` of npm `redis`) the
 * store detects: `sendCommand(args, options)` and `withTypeMapping`. A
 * node-redis cluster (`createCluster()`) is detected by its `getSlotMaster`.
 */
export interface NodeRedisClientLike {
  /** node-redis's raw command method. */
  sendCommand(...args: never[]): Promise<unknown>;
  /** Present on node-redis clients; tells them from a {@linkcode RedisCommander}. */
  withTypeMapping(...args: never[]): unknown;
}

/**
 * The part of an ioredis client or cluster the store uses: `callBuffer`, which
 * sends a raw command and answers bulk strings as bytes.
 */
export interface IoRedisClientLike {
  /** ioredis's raw command method with byte replies. */
  callBuffer(...args: never[]): Promise<unknown>;
}

/** What {@linkcode RedisStoreOptions.client} accepts. */
export type RedisClientLike =
  | RedisCommander
  | NodeRedisClientLike
  | IoRedisClientLike;

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

// The record is a hash at `prefix + slot`:
//   v       the record format version (RECORD_VERSION)
//   st      "f" (in flight) or "c" (completed)
//   fp      the fingerprint of the first claim
//   tok     the owner's token
//   lu      lease until: server time in ms
//   dl      deadline: server time in ms; PEXPIRE drops the key then too
//   status  the response status            (completed)
//   hdr     the header pairs as JSON       (completed)
//   body    the body bytes                 (completed, unless omitted)
//   om      why the body was omitted       (completed, when omitted)
// Any other value at the key (another type, a hash without our version
// field, a missing or malformed field, another version) is unreadable: it
// reads as in flight and no script ever writes to it. Reads go through
// `redis.pcall`, which answers a key of another type with an error table
// instead of raising WRONGTYPE: one call where `TYPE` and then a read would
// be two. The key expires at `dl` (PEXPIRE at the claim), so Redis itself
// hides a record past its deadline; `complete` and `release` need no clock.
//
// Every `redis.call` costs the server about a microsecond, and the server's
// time is what bounds throughput at many requests in flight: the scripts make
// as few as they can (claim: TIME, HGETALL, and HSET + PEXPIRE when it takes
// the slot; complete: HMGET, HSET; release: HMGET, DEL; extend: TIME, HMGET,
// HSET).

const V = String(RECORD_VERSION);

/** The server's clock in ms. */
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/**
 * Shared by the fenced writes: answers 0 unless ARGV[1], the token, owns the
 * slot (a record of ours, in flight under this token; past its deadline the
 * key is gone). Ownership does not depend on the lease: an owner nobody took
 * over keeps it.
 */
const OWNED = `local key = KEYS[1]
local r = redis.pcall('HMGET', key, 'v', 'st', 'tok', 'dl')
if r.err or r[1] ~= '${V}' or r[2] ~= 'f' or r[3] ~= ARGV[1] or not tonumber(r[4]) then
  return 0
end
`;

/**
 * ARGV: fingerprint, token, leaseMs, ttlMs. Replies 1 (acquired), 2
 * (acquired by taking over an expired lease), {0, fp, ms} (in flight, ms
 * left on the lease), {1, fp, status, hdr, body, om} (completed), or
 * {2, ms} (unreadable, with a retry hint).
 */
const CLAIM = `local key = KEYS[1]
${NOW}local lease = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local function take(reply, existed)
  if existed then redis.call('DEL', key) end
  redis.call('HSET', key, 'v', '${V}', 'st', 'f', 'fp', ARGV[1], 'tok', ARGV[2],
    'lu', string.format('%d', now + lease), 'dl', string.format('%d', now + ttl))
  redis.call('PEXPIRE', key, ttl)
  return reply
end
local function unreadable()
  local left = redis.call('PTTL', key)
  if left > 0 and left < lease then return {2, left} end
  return {2, lease}
end
local h = redis.pcall('HGETALL', key)
if h.err then return unreadable() end
if #h == 0 then return take(1, false) end
local r = {}
for i = 1, #h, 2 do r[h[i]] = h[i + 1] end
local dl = tonumber(r.dl)
if r.v ~= '${V}' or not r.fp or dl == nil then return unreadable() end
if dl <= now then return take(1, true) end
if r.st == 'c' then
  return {1, r.fp, r.status or false, r.hdr or false, r.body or false, r.om or false}
end
local lu = tonumber(r.lu)
if r.st ~= 'f' or lu == nil then return unreadable() end
if lu > now then return {0, r.fp, lu - now} end
return take(2, true)
`;

/** ARGV: token, status, hdr, body, om ("" when the body is present). */
const COMPLETE = `${OWNED}if ARGV[5] == '' then
  redis.call('HSET', key, 'st', 'c', 'status', ARGV[2], 'hdr', ARGV[3], 'body', ARGV[4])
else
  redis.call('HSET', key, 'st', 'c', 'status', ARGV[2], 'hdr', ARGV[3], 'om', ARGV[5])
end
return 1
`;

/** ARGV: token. */
const RELEASE = `${OWNED}redis.call('DEL', key)
return 1
`;

/** ARGV: token, leaseMs. */
const EXTEND =
  `${OWNED}${NOW}redis.call('HSET', key, 'lu', string.format('%d', now + tonumber(ARGV[2])))
return 1
`;

interface Script {
  readonly source: string;
  readonly sha: string;
}

function script(source: string): Script {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

const SCRIPTS: Readonly<Record<StoreOperation, Script>> = {
  claim: script(CLAIM),
  complete: script(COMPLETE),
  release: script(RELEASE),
  extend: script(EXTEND),
};

/** node-redis's RESP type code of a bulk string (`RESP_TYPES.BLOB_STRING`). */
const BLOB_STRING = 36;
const NODE_REDIS_OPTIONS = { typeMapping: { [BLOB_STRING]: Buffer } };

function toBuffer(arg: string | Uint8Array): string | Buffer {
  return typeof arg === "string" || Buffer.isBuffer(arg)
    ? arg
    : Buffer.from(arg.buffer, arg.byteOffset, arg.byteLength);
}

type Send = (args: (string | Uint8Array)[]) => Promise<unknown>;

/** Sends `WAIT replicas timeout` on the connection that serves `key`. */
type Wait = (
  key: string,
  replicas: string,
  timeout: string,
) => Promise<unknown>;

/**
 * `WAIT` counts what the connection it is sent on wrote: on a cluster it
 * must reach the key's master, so it is routed by the key. ioredis routes a
 * keyless command to any node, so on an ioredis `Cluster` it goes in a
 * pipeline behind an `EXISTS` of the key (one round trip, to the key's
 * master).
 */
function waiter(client: RedisClientLike, send: Send): Wait {
  const c = client as unknown as Record<string, unknown>;
  if (typeof c.callBuffer === "function" && c.isCluster === true) {
    const pipeline = c.pipeline as (
      commands: string[][],
    ) => { exec(): Promise<[Error | null, unknown][] | null> };
    return async (key, replicas, timeout) => {
      const replies = await pipeline.call(client, [["exists", key], [
        "wait",
        replicas,
        timeout,
      ]]).exec();
      const [error, count] = replies?.[1] ?? [new Error("no reply"), null];
      if (error) throw error;
      return count;
    };
  }
  if (
    typeof c.getSlotMaster === "function" &&
    typeof c.sendCommand === "function"
  ) {
    const sendCommand = c.sendCommand as (
      ...args: unknown[]
    ) => Promise<unknown>;
    return (key, replicas, timeout) =>
      sendCommand.call(client, key, false, ["WAIT", replicas, timeout]);
  }
  return (_key, replicas, timeout) => send(["WAIT", replicas, timeout]);
}

/** Turns whatever client was passed into one `send` function. */
function commander(client: RedisClientLike): Send {
  if (client === null || typeof client !== "object") {
    throw new TypeError(
      `'client' must be a node-redis client, an ioredis client or a RedisCommander: current value is ${client}`,
    );
  }
  const c = client as unknown as Record<string, unknown>;
  if (typeof c.callBuffer === "function") {
    // ioredis: callBuffer(command, ...args), byte replies; Uint8Array args
    // must be Buffers (others are stringified).
    const call = c.callBuffer as (...args: unknown[]) => Promise<unknown>;
    return (args) => {
      const out: unknown[] = new Array(args.length);
      for (let i = 0; i < args.length; i++) out[i] = toBuffer(args[i]!);
      return call.apply(client, out);
    };
  }
  if (
    typeof c.sendCommand === "function" &&
    typeof c.withTypeMapping === "function"
  ) {
    const send = c.sendCommand as (...args: unknown[]) => Promise<unknown>;
    const map = (args: (string | Uint8Array)[]) => {
      const out: (string | Buffer)[] = new Array(args.length);
      for (let i = 0; i < args.length; i++) out[i] = toBuffer(args[i]!);
      return out;
    };
    if (typeof c.getSlotMaster === "function") {
      // node-redis cluster: sendCommand(firstKey, isReadonly, args, options).
      // Every script here takes exactly one key, the fourth argument.
      return (args) =>
        send.call(client, args[3], false, map(args), NODE_REDIS_OPTIONS);
    }
    // node-redis client: sendCommand(args, options), Buffer args only.
    return (args) => send.call(client, map(args), NODE_REDIS_OPTIONS);
  }
  if (typeof c.sendCommand === "function") {
    const send = c.sendCommand as Send;
    return (args) => send.call(client, args);
  }
  throw new TypeError(
    "'client' must be a node-redis client, an ioredis client or a RedisCommander: it has no sendCommand or callBuffer method",
  );
}

function isNoScript(error: unknown): boolean {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" && /^-?NOSCRIPT/.test(message);
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function text(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (!(value instanceof Uint8Array)) return null;
  // Fingerprints and statuses are short ASCII: skip the decoder for them.
  if (value.length > 96) return decoder.decode(value);
  let out = "";
  for (let i = 0; i < value.length; i++) {
    const byte = value[i]!;
    if (byte > 0x7f) return decoder.decode(value);
    out += String.fromCharCode(byte);
  }
  return out;
}

function bytes(value: unknown): Uint8Array | null {
  if (value instanceof Uint8Array) {
    // A plain view, not a Buffer, over the same memory.
    return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  }
  if (typeof value === "string") return encoder.encode(value);
  return null;
}

/** A lease or TTL: a positive finite number of ms, rounded up. */
function duration(name: string, value: unknown): string {
  if (
    typeof value !== "number" || !Number.isFinite(value) || value <= 0
  ) {
    throw new RangeError(
      `'${name}' must be a positive number of milliseconds: current value is ${value}`,
    );
  }
  return String(Math.ceil(value));
}

/**
 * An {@linkcode IdempotencyStore} on Redis: one key per slot (so Redis
 * Cluster works), every operation one round trip.
 *
 * - Each operation is a Lua script sent with `EVALSHA`, and again with `EVAL`
 *   when Redis answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).
 * - Leases and deadlines use the server's clock (`TIME`), so instances with
 *   skewed clocks agree. A claim that acquires the slot sets its deadline and
 *   `PEXPIRE`s the key; `complete` and `extend` keep both (KEEPTTL semantics).
 * - A claim answers a completed record whole, body included: a replay needs
 *   no second trip. Bodies are stored as raw bytes.
 * - A value at the key that is not a record of ours (another type, a missing
 *   field, another format version) reads as `in_flight` with
 *   `fingerprint: null` and is never overwritten: no exception on the request
 *   path, and never a second execution.
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
 *     return Promise.resolve(1); // the claim script's "acquired"
 *   },
 * };
 * const store = new RedisStore({ client });
 * const claim = await store.claim("slot-1", { fingerprint: "f", leaseMs: 1000, ttlMs: 60_000 });
 * assert.equal(claim.state, "acquired");
 * assert.deepEqual(sent, ["EVALSHA"]);
 * ```
 */
export class RedisStore implements IdempotencyStore {
  #send: Send;
  #wait: Wait;
  #prefix: string;
  #timeoutMs: number;
  #waitReplicas: number;
  #waitTimeoutMs: number;
  #pending = new Set<Call>();
  #timer: Timer | undefined;
  #orphans = new Orphans((slot, token) => this.release(slot, token));

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
    this.#wait = waiter(options.client, this.#send);
    const prefix = options.prefix ?? "idempotency:";
    if (typeof prefix !== "string") {
      throw new TypeError(
        `'prefix' must be a string: current value is ${prefix}`,
      );
    }
    this.#prefix = prefix;
    this.#timeoutMs = positiveInteger("timeoutMs", options.timeoutMs ?? 2000);
    const replicas = options.waitReplicas ?? 0;
    this.#waitReplicas = replicas === 0
      ? 0
      : positiveInteger("waitReplicas", replicas);
    this.#waitTimeoutMs = positiveInteger(
      "waitTimeoutMs",
      options.waitTimeoutMs ?? 500,
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
    const { fingerprint } = options;
    if (typeof fingerprint !== "string") {
      throw new TypeError(
        `'fingerprint' must be a string: current value is ${fingerprint}`,
      );
    }
    const lease = duration("leaseMs", options.leaseMs);
    const ttl = duration("ttlMs", options.ttlMs);
    const token = crypto.randomUUID();
    const reply = await this.#eval("claim", slot, [
      fingerprint,
      token,
      lease,
      ttl,
    ], { slot, token, leaseMs: Number(lease) });
    if (reply === 1 || reply === 2) {
      if (this.#waitReplicas > 0) {
        try {
          await this.#replicated("claim", slot);
        } catch (error) {
          // The claim holds the slot on the master: undo it by its token.
          this.#orphans.unknown(slot, token, Number(lease));
          throw error;
        }
      }
      return { state: "acquired", token, recovered: reply === 2 };
    }
    const hint = Number(lease);
    if (!Array.isArray(reply)) return unreadable(hint);
    const [kind, a, b, c, d, e] = reply;
    if (kind === 0) {
      const fp = text(a);
      return fp === null ? unreadable(hint) : {
        state: "in_flight",
        fingerprint: fp,
        retryAfterMs: Math.max(1, Number(b) || 1),
      };
    }
    if (kind === 1) {
      const fp = text(a);
      const statusText = text(b);
      const response = toStoredResponse(
        statusText === null ? null : Number(statusText),
        decodeHeaders(text(c)),
        bytes(d),
        e === null || e === undefined ? undefined : text(e),
      );
      if (fp === null || response === null) return unreadable(hint);
      return { state: "completed", fingerprint: fp, response };
    }
    if (kind === 2) return unreadable(Number(a) || hint);
    return unreadable(hint);
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
    const reply = await this.#eval("complete", slot, [
      String(token),
      String(response.status),
      encodeHeaders(response.headers),
      response.body ?? "",
      response.body === null ? response.omitted! : "",
    ]);
    if (reply !== 1) return "lost";
    if (this.#waitReplicas > 0) await this.#replicated("complete", slot);
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
    return reply === 1 ? "applied" : "lost";
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
    const lease = duration("leaseMs", leaseMs);
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
    const want = this.#waitReplicas;
    let timer: Timer | undefined;
    let count: unknown;
    try {
      count = await Promise.race([
        this.#wait(
          this.#prefix + slot,
          String(want),
          String(this.#waitTimeoutMs),
        ),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error("WAIT did not answer")),
            this.#waitTimeoutMs + this.#timeoutMs,
          );
        }),
      ]);
    } catch (error) {
      const message = (error as { message?: unknown } | null)?.message;
      throw new StoreError(
        `Redis ${operation} failed: WAIT ${want}: ${message ?? error}`,
        { operation, cause: error },
      );
    } finally {
      clearTimeout(timer);
    }
    if (Number(count) < want) {
      throw new StoreError(
        `Redis ${operation} was acknowledged by ${count} of ${want} replicas within ${this.#waitTimeoutMs} ms`,
        { operation, cause: new Error(`WAIT answered ${count}`) },
      );
    }
  }

  /**
   * Runs one script on the slot's key: EVALSHA, then EVAL on NOSCRIPT. A
   * claim passes its token, so that a claim that fails but may still land
   * is undone (see {@linkcode Orphans}).
   */
  #eval(
    operation: StoreOperation,
    slot: string,
    argv: (string | Uint8Array)[],
    claim?: ClaimCall,
  ): Promise<unknown> {
    const script = SCRIPTS[operation];
    const args: (string | Uint8Array)[] = new Array(4 + argv.length);
    args[0] = "EVALSHA";
    args[1] = script.sha;
    args[2] = "1";
    args[3] = this.#prefix + slot;
    for (let i = 0; i < argv.length; i++) args[4 + i] = argv[i]!;
    return new Promise((resolve, reject) => {
      const call: Call = {
        operation,
        deadline: performance.now() + this.#timeoutMs,
        claim,
        resolve,
        reject,
      };
      this.#watch(call);
      const attempt = (first: boolean) => {
        let pending: Promise<unknown>;
        try {
          pending = this.#send(args);
        } catch (error) {
          // Thrown before anything was sent: nothing can land.
          call.claim = undefined;
          this.#settle(call, error, true);
          return;
        }
        pending.then(
          (reply) => this.#settle(call, reply, false),
          (error) => {
            if (first && this.#pending.has(call) && isNoScript(error)) {
              args[0] = "EVAL";
              args[1] = script.source;
              attempt(false);
            } else {
              this.#settle(call, error, true);
            }
          },
        );
      };
      attempt(true);
    });
  }

  // One watchdog timer per store instead of one timer per command (which
  // costs ~10 µs of latency per operation here). It is armed for the oldest
  // pending call's deadline; deadlines only grow, so it is never late for a
  // newer call. It is ref'd while calls are pending and unref'd when none are,
  // so it never keeps a process alive; it fires at most once more and then
  // stops.

  #watch(call: Call): void {
    this.#pending.add(call);
    if (this.#timer === undefined) {
      this.#timer = setTimeout(this.#fire, this.#timeoutMs);
    } else if (this.#pending.size === 1) {
      refTimer(this.#timer, true);
    }
  }

  #settle(call: Call, value: unknown, failed: boolean): void {
    const claim = call.claim;
    if (!this.#pending.delete(call)) {
      // Timed out already: the caller has its error. A claim that landed
      // after all (or may have) is undone.
      if (claim !== undefined) {
        this.#orphans.settled(
          claim.token,
          failed ? mayHaveRun(value) : value === 1 || value === 2,
        );
      }
      return;
    }
    if (this.#pending.size === 0 && this.#timer !== undefined) {
      refTimer(this.#timer, false);
    }
    if (!failed) {
      this.#orphans.kick(); // Redis answers: undo what waits for it
      call.resolve(value);
    } else {
      if (claim !== undefined && mayHaveRun(value)) {
        this.#orphans.unknown(claim.slot, claim.token, claim.leaseMs);
      }
      const message = (value as { message?: unknown } | null)?.message;
      call.reject(
        new StoreError(
          `Redis ${call.operation} failed: ${message ?? value}`,
          { operation: call.operation, cause: value },
        ),
      );
    }
  }

  #fire = (): void => {
    this.#timer = undefined;
    const now = performance.now();
    for (const call of this.#pending) {
      if (call.deadline > now) {
        this.#timer = setTimeout(this.#fire, call.deadline - now);
        return;
      }
      this.#pending.delete(call);
      const claim = call.claim;
      if (claim !== undefined) {
        this.#orphans.out(claim.slot, claim.token, claim.leaseMs);
      }
      call.reject(
        new StoreError(
          `Redis ${call.operation} did not answer within ${this.#timeoutMs} ms`,
          {
            operation: call.operation,
            cause: new Error(`Timed out after ${this.#timeoutMs} ms`),
          },
        ),
      );
    }
  };
}

/** What a claim's call needs to be undone. */
interface ClaimCall {
  slot: string;
  token: string;
  leaseMs: number;
}

/** A pending operation, watched for its deadline. */
interface Call {
  operation: StoreOperation;
  deadline: number;
  /** Set on claims that may still land. */
  claim: ClaimCall | undefined;
  resolve(reply: unknown): void;
  reject(error: StoreError): void;
}

type Timer = ReturnType<typeof setTimeout>;

const denoTimers = (globalThis as {
  Deno?: { refTimer?(id: number): void; unrefTimer?(id: number): void };
}).Deno;

/** Lets `timer` keep the process alive, or not (Deno ids or Node objects). */
function refTimer(timer: Timer, on: boolean): void {
  if (typeof timer === "number") {
    if (on) denoTimers?.refTimer?.(timer);
    else denoTimers?.unrefTimer?.(timer);
  } else {
    const t = timer as { ref?(): void; unref?(): void };
    if (on) t.ref?.();
    else t.unref?.();
  }
}

/**
 * Whether a command that failed with `error` may have run on the server: not
 * when the script was unknown (NOSCRIPT) or the client refused to send it
 * (node-redis offline or closed, ioredis without its offline queue). Any
 * other error (a connection that broke under the command) may hide a run.
 */
function mayHaveRun(error: unknown): boolean {
  if (isNoScript(error)) return false;
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== "string") return true;
  return !(message === "The client is offline" ||
    message === "The client is closed" ||
    message.includes("enableOfflineQueue options is false"));
}

function unreadable(retryAfterMs: number): ClaimResult {
  return {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)),
  };
}
