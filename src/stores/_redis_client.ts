// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's transport: the clients it takes, one {@linkcode Send} for
 * all, and the reading of their replies and errors.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { byteView } from "../_record.ts";
import { StoreError } from "../store.ts";
import { messageOf } from "../_validate.ts";
import type { Operation, StoreErrors } from "./_store_call.ts";

/**
 * The one-method client interface, for clients other than node-redis and
 * ioredis. A reply is decoded the usual way: a bulk string as a `Uint8Array`
 * (a `string` works, but then a body that is not UTF-8 reads as in flight
 * until it expires), an integer as a `number`, a nil as `null`, an array as
 * an array; an error rejects with an `Error` whose message starts with its
 * code (`NOSCRIPT`), maybe after a `-`.
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
 * const fromDbRedis = (redis: DbRedis): RedisCommander => ({
 *   sendCommand: ([command, ...args]) =>
 *     redis.sendCommand(command as string, args, { returnUint8Arrays: true }),
 * });
 * // new RedisStore({ client: fromDbRedis(await connect({ hostname: "127.0.0.1" })) })
 * ```
 */
export interface RedisCommander {
  /** Sends one command (name, then arguments); resolves with its reply. */
  sendCommand(args: (string | Uint8Array)[]): Promise<unknown>;
}

/**
 * The part of a node-redis 5 client (`createClient()` of npm `redis`) or
 * cluster (`createCluster()`, which has `getSlotMaster`) the store detects.
 */
export interface NodeRedisClientLike {
  /** node-redis's raw command method. */
  sendCommand(...args: never[]): Promise<unknown>;
  /** Present on node-redis clients; tells them from a {@linkcode RedisCommander}. */
  withTypeMapping(...args: never[]): unknown;
}

/** The part of an ioredis client or cluster the store detects. */
export interface IoRedisClientLike {
  /** ioredis's raw command method with byte replies. */
  callBuffer(...args: never[]): Promise<unknown>;
}

/** What {@linkcode RedisStoreOptions.client} accepts. */
export type RedisClientLike =
  | RedisCommander
  | NodeRedisClientLike
  | IoRedisClientLike;

/** Bulk strings (node-redis `RESP_TYPES.BLOB_STRING`, 36) as Buffers. */
const NODE_REDIS_OPTIONS = { typeMapping: { 36: Buffer } };
type Method = (...args: unknown[]) => Promise<unknown>;

function toBuffer(arg: string | Uint8Array): string | Buffer {
  return typeof arg === "string" || Buffer.isBuffer(arg)
    ? arg
    : Buffer.from(arg.buffer, arg.byteOffset, arg.byteLength);
}

/** The commands the store sends, by the name it sends them. */
const IOREDIS_COMMANDS = [
  "SET",
  "EVALSHA",
  "EVAL",
  "PUBLISH",
  "WAIT",
  "SCAN",
  "INFO",
];

/**
 * Sends one command (name, arguments), never throwing: a command the client
 * refused at once rejects with an error {@linkcode mayHaveRun} knows unsent.
 */
export type Send = (args: (string | Uint8Array)[]) => Promise<unknown>;

/** The errors of commands a client refused at once, before sending them. */
const refused = new WeakSet<object>();

/** Turns the client into one {@linkcode Send}; a `TypeError` if it is none. */
export function commander(client: RedisClientLike): Send {
  const send = clientSend(client);
  return (args) => {
    try {
      return send(args);
    } catch (thrown) {
      const error = Object(thrown) === thrown
        ? thrown as object
        : new Error(`${thrown}`);
      refused.add(error);
      return Promise.reject(error);
    }
  };
}

function clientSend(client: RedisClientLike): Send {
  if (client === null || typeof client !== "object") {
    throw new TypeError(
      `'client' must be a node-redis client, an ioredis client or a RedisCommander: current value is ${client}`,
    );
  }
  const c = client as unknown as Record<string, unknown>;
  if (typeof c.callBuffer === "function") {
    // ioredis: the command's byte-reply method (setBuffer(key, …)), else
    // callBuffer(command, …): alone, with enableAutoPipelining it drops the
    // command's name (redis/ioredis#1923). Args: strings or Buffers.
    const call = c.callBuffer as Method;
    const methods = new Map<unknown, Method>();
    for (const name of IOREDIS_COMMANDS) {
      const method = c[`${name.toLowerCase()}Buffer`];
      if (typeof method === "function") methods.set(name, method as Method);
    }
    return (args) => {
      const method = methods.get(args[0]);
      const out = args.map(toBuffer);
      return method === undefined
        ? call.apply(client, out)
        : method.apply(client, out.slice(1));
    };
  }
  if (
    typeof c.sendCommand === "function" &&
    typeof c.withTypeMapping === "function"
  ) {
    const send = c.sendCommand as Method;
    const map = (args: (string | Uint8Array)[]) => args.map(toBuffer);
    if (typeof c.getSlotMaster === "function") {
      // sendCommand(firstKey, isReadonly, args, options): a script's one key
      // is its fourth argument, SET's and PUBLISH's the second.
      return (args) =>
        send.call(
          client,
          args[0] === "EVALSHA" || args[0] === "EVAL" ? args[3] : args[1],
          false,
          map(args),
          NODE_REDIS_OPTIONS,
        );
    }
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

/** The code of an error by which Redis refused a command, writing nothing. */
export function refusal(error: unknown): string | undefined {
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== "string") return undefined;
  return /^-?(NOSCRIPT|WRONGTYPE|ERR syntax error)/.exec(message)?.[1];
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** A reply's bulk string as text, or `null` when it is none. */
export function text(value: unknown): string | null {
  if (typeof value === "string") return value;
  return value instanceof Uint8Array ? decoder.decode(value) : null;
}

/** A reply's bulk string as a plain byte view, or `null` when it is none. */
export function bytes(value: unknown): Uint8Array | null {
  return typeof value === "string" ? encoder.encode(value) : byteView(value);
}

/**
 * Whether a command that failed with `error` may have run: not when Redis
 * ({@linkcode refusal}) or the client (offline, closed, no offline queue,
 * thrown at once) refused it; a connection that broke under it may hide one.
 */
export function mayHaveRun(error: unknown): boolean {
  if (Object(error) === error && refused.has(error as object)) return false;
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== "string") return true;
  return !(refusal(error) || message === "The client is offline" ||
    message === "The client is closed" ||
    message.includes("enableOfflineQueue options is false"));
}

/**
 * What to do about the client, read from its own state (node-redis `isOpen`
 * and `isReady`, ioredis `status`) when a command failed (`timedOut`: missed
 * its deadline), or `undefined`: a client may connect after the store is
 * made, so nothing is refused at construction, and nothing is read while
 * commands succeed.
 */
export type Hint = (timedOut?: boolean) => string | undefined;

/** The {@linkcode Hint} of `client`. */
export function connectionHint(client: RedisClientLike): Hint {
  const c = client as unknown as Record<string, unknown>;
  const initial = c.status; // ioredis: "wait" with `lazyConnect`
  let ready = initial === "ready"; // then "connecting" is a reconnect, not a lazy start
  if (
    !ready && typeof c.once === "function" && typeof c.callBuffer === "function"
  ) {
    c.once.call(client, "ready", () => ready = true);
  }
  return (timedOut = false) => {
    if (c.isOpen === false) return NOT_OPEN;
    if (c.isOpen === true) {
      if (c.isReady === false) {
        // node-redis ends its reconnect loop on an `error` nobody listens to.
        const deaf = typeof c.listenerCount === "function" &&
          c.listenerCount.call(client, "error") === 0;
        return deaf ? DEAF : unreachable(
          "connecting or reconnecting",
          "node-redis `isReady` false",
        );
      }
      return timedOut && c.isReady === true
        ? slow("node-redis `isReady` true")
        : undefined;
    }
    if (typeof c.callBuffer !== "function") return undefined;
    const status = c.status;
    const shown = `ioredis \`status\` "${status}"`;
    if (status === "end") return ENDED;
    if (status === "ready") return timedOut ? slow(shown) : undefined;
    if (
      status === "wait" ||
      (initial === "wait" && !ready &&
        (status === "connecting" || status === "connect"))
    ) {
      return LAZY;
    }
    const again = ready || status === "reconnecting";
    const away = again || status === "connecting" || status === "connect";
    return away
      ? unreachable(again ? "reconnecting" : "connecting", shown)
      : undefined;
  };
}

const NOT_OPEN =
  "the Redis client is not connected (never connected, or closed): call `await client.connect()` before serving, and close it only after the server stops";
const LAZY =
  "the Redis client is not connected (ioredis `lazyConnect`): call `await client.connect()` before serving";
const DEAF =
  "the Redis client is not ready and has no 'error' listener (node-redis `isReady` false), so it will not reconnect by itself even once Redis is back: add `client.on(\"error\", …)` before `connect()`, and check that Redis runs and the client's URL";
const ENDED =
  "the Redis client was closed (`quit()` or `disconnect()`): close it only after the server stops";

/** A client that cannot reach Redis, in its own words. */
function unreachable(doing: string, state: string): string {
  return `the Redis client is ${doing} (${state}): Redis is unreachable; check that it runs and the client's URL`;
}

/** A client connected to a Redis that did not answer in time. */
function slow(state: string): string {
  return `the Redis client is connected (${state}) but Redis did not answer: it is overloaded, blocked by a slow command or paused; check \`redis-cli --latency\` and SLOWLOG, or raise 'timeoutMs'`;
}

/** How RedisStore words a command that failed before `timeoutMs`. */
export function callFailure(
  hint: Hint,
): (operation: Operation, cause: unknown) => StoreError {
  return (operation, cause) => failure(operation, cause, "", hint());
}

/** How RedisStore words a `WAIT` that failed or missed its deadline. */
export function waitErrors(
  hint: Hint,
  replicas: number,
  waitMs: number,
): StoreErrors {
  const wait = `WAIT ${replicas}: `;
  const late = `WAIT did not answer within ${waitMs} ms and more`;
  return {
    failed: (operation, cause) => failure(operation, cause, wait, hint()),
    timedOut: (operation) =>
      failure(operation, new Error(late), wait, hint(true)),
  };
}

/** A failed call's error: `what` failed with `cause`, then what to do. */
function failure(
  op: Operation,
  cause: unknown,
  what: string,
  hint: string | undefined,
): StoreError {
  const reason = messageOf(cause);
  const message = `Redis ${op} failed: ${what}${reason}${colon(hint)}`;
  return new StoreError(message, { operation: op, cause });
}

const colon = (hint: string | undefined) => hint ? `: ${hint}` : "";

/** Sends `WAIT` for the write on `key`, on the connection that wrote it. */
export type Wait = (key: string) => Promise<unknown>;

/**
 * On a cluster `WAIT` goes to the key's master: ioredis routes a keyless
 * command to any node, so there it follows an `EXISTS` in one pipeline.
 */
export function waiter(
  client: RedisClientLike,
  send: Send,
  replicas: number,
  timeoutMs: number,
): Wait {
  const [n, ms] = [String(replicas), String(timeoutMs)];
  const c = client as unknown as Record<string, unknown>;
  if (typeof c.callBuffer === "function" && c.isCluster === true) {
    const pipeline = c.pipeline as (
      commands: string[][],
    ) => { exec(): Promise<[Error | null, unknown][] | null> };
    return async (key) => {
      const commands = [["exists", key], ["wait", n, ms]];
      const replies = await pipeline.call(client, commands).exec();
      const [error, count] = replies?.[1] ?? [new Error("no reply"), null];
      if (error) throw error;
      return count;
    };
  }
  if (
    typeof c.getSlotMaster === "function" &&
    typeof c.sendCommand === "function"
  ) {
    const sendCommand = c.sendCommand as Method;
    return (key) => sendCommand.call(client, key, false, ["WAIT", n, ms]);
  }
  return () => send(["WAIT", n, ms]);
}
