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

import {
  assertStoredResponse,
  byteView,
  decodeHeaders,
  encodeHeaders,
  RECORD_VERSION,
  toStoredResponse,
  unreadable,
} from "../_record.ts";
import { positiveInteger } from "../_validate.ts";
import { Orphans } from "./_orphans.ts";
import { type DeadlineHandler, Deadlines } from "../_time.ts";

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
  return typeof value === "string" ? encoder.encode(value) : byteView(value);
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
  #prefix: string;
  #orphans = new Orphans((slot, token) => this.release(slot, token));
  #deadlines: Deadlines<Call>;

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
    this.#deadlines = new Deadlines(
      timeoutMs,
      redisHandler(this.#orphans, timeoutMs, this.#start),
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
    const token = crypto.randomUUID();
    const reply = await this.#eval("claim", slot, [
      fingerprint,
      token,
      String(leaseMs),
      String(ttlMs),
    ], { slot, token, leaseMs });
    if (reply === 1 || reply === 2) {
      return { state: "acquired", token, recovered: reply === 2 };
    }
    const hint = leaseMs;
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
    return reply === 1 ? "applied" : "lost";
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
    const lease = String(durationMs("leaseMs", leaseMs));
    const reply = await this.#eval("extend", slot, [String(token), lease]);
    return reply === 1 ? "applied" : "lost";
  }

  /**
   * Runs one script on the slot's key: EVALSHA, then EVAL on NOSCRIPT, under
   * the store's deadline. A claim passes its token, so that a claim that
   * fails but may still land is undone (see {@linkcode Orphans}).
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
    const call: Call = { operation, args, claim, sent: true, first: true };
    return this.#deadlines.withDeadline(this.#start, call);
  }

  /** Sends a call's command. */
  #start = (call: Call): Promise<unknown> => {
    try {
      return this.#send(call.args);
    } catch (error) {
      // Thrown before anything was sent: nothing can land.
      call.sent = false;
      return Promise.reject(error);
    }
  };
}

/** One command under way. */
interface Call {
  operation: StoreOperation;
  /** The command: EVALSHA, or EVAL once the script was not found. */
  args: (string | Uint8Array)[];
  /** Set on claims, which may land after a failure and must be undone. */
  claim: ClaimCall | undefined;
  /** `false` when the client threw before sending anything. */
  sent: boolean;
  /** Whether this is the first attempt (EVALSHA). */
  first: boolean;
}

/** What a claim's call needs to be undone. */
interface ClaimCall {
  slot: string;
  token: string;
  leaseMs: number;
}

/** What a RedisStore does as its commands settle, fail or time out. */
function redisHandler(
  orphans: Orphans,
  timeoutMs: number,
  start: (call: Call) => Promise<unknown>,
): DeadlineHandler<Call> {
  return {
    resolved() {
      orphans.kick(); // Redis answers: undo what waits for it
    },
    retry(call, error) {
      if (!call.first || !isNoScript(error)) return undefined;
      call.first = false;
      call.args[0] = "EVAL";
      call.args[1] = SCRIPTS[call.operation].source;
      return start(call);
    },
    failed({ operation, claim, sent }, error) {
      if (claim !== undefined && sent && mayHaveRun(error)) {
        orphans.unknown(claim.slot, claim.token, claim.leaseMs);
      }
      const message = (error as { message?: unknown } | null)?.message;
      return new StoreError(
        `Redis ${operation} failed: ${message ?? error}`,
        { operation, cause: error },
      );
    },
    expired({ operation, claim }) {
      if (claim !== undefined) {
        orphans.out(claim.slot, claim.token, claim.leaseMs);
      }
      return new StoreError(
        `Redis ${operation} did not answer within ${timeoutMs} ms`,
        {
          operation,
          cause: new Error(`Timed out after ${timeoutMs} ms`),
        },
      );
    },
    late({ claim, sent }, value, failed) {
      // The caller has its error. A claim that landed after all (or may
      // have) is undone.
      if (claim !== undefined && sent) {
        orphans.settled(
          claim.token,
          failed ? mayHaveRun(value) : value === 1 || value === 2,
        );
      }
    },
  };
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
