// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's transport: the client shapes it takes, one {@linkcode Send}
 * for any of them, and the reading of their replies and errors.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { byteView } from "../_record.ts";

/**
 * The one-method client interface the store talks to: send one command as an
 * array of arguments, get its reply.
 *
 * The reply must be what Redis answered, decoded the usual way: a bulk string
 * as a `Uint8Array` (or a `string`: then a record whose body is not UTF-8
 * text reads as in flight until it expires, so ask your client for bytes), an
 * integer as a `number`, a nil as `null`, an array as an array.
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

/** node-redis's RESP type code of a bulk string (`RESP_TYPES.BLOB_STRING`). */
const BLOB_STRING = 36;
const NODE_REDIS_OPTIONS = { typeMapping: { [BLOB_STRING]: Buffer } };

function toBuffer(arg: string | Uint8Array): string | Buffer {
  return typeof arg === "string" || Buffer.isBuffer(arg)
    ? arg
    : Buffer.from(arg.buffer, arg.byteOffset, arg.byteLength);
}

/** The commands the store sends, by the name it sends them. */
const IOREDIS_COMMANDS = ["SET", "EVALSHA", "EVAL", "PUBLISH", "WAIT"];

/**
 * Sends one command, given as its name and arguments, and resolves with the
 * reply. Never throws: a command the client refused at once rejects with an
 * error that {@linkcode mayHaveRun} knows never ran.
 */
export type Send = (args: (string | Uint8Array)[]) => Promise<unknown>;

/** The errors of commands a client refused at once, before sending them. */
const refused = new WeakSet<object>();

/**
 * Turns whatever client was passed into one `send` function.
 *
 * @param client A node-redis or ioredis client or cluster, or a {@linkcode RedisCommander}.
 * @returns The function that sends a command on it.
 * @throws {TypeError} When `client` is none of these.
 */
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
    // ioredis: a command's own byte-reply method (setBuffer(key, …),
    // evalshaBuffer(sha, …)), or callBuffer(command, ...args) for one it
    // lacks. Not callBuffer for all: with enableAutoPipelining it drops the
    // command's name (redis/ioredis#1923). Uint8Array args must be Buffers
    // (others are stringified).
    const call = c.callBuffer as (...args: unknown[]) => Promise<unknown>;
    type Method = (...args: unknown[]) => Promise<unknown>;
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
    const send = c.sendCommand as (...args: unknown[]) => Promise<unknown>;
    // node-redis takes strings and Buffers only.
    const map = (args: (string | Uint8Array)[]) => args.map(toBuffer);
    if (typeof c.getSlotMaster === "function") {
      // node-redis cluster: sendCommand(firstKey, isReadonly, args, options).
      // Every script here takes exactly one key, the fourth argument; every
      // other command (SET, PUBLISH) has its key first.
      return (args) =>
        send.call(
          client,
          args[0] === "EVALSHA" || args[0] === "EVAL" ? args[3] : args[1],
          false,
          map(args),
          NODE_REDIS_OPTIONS,
        );
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

/**
 * The error code of a reply by which Redis refused a command, writing
 * nothing: `NOSCRIPT` (an EVALSHA of a script it does not know), `WRONGTYPE`
 * (a key of another type), `ERR syntax error` (`SET … NX … GET` before Redis
 * 7.0); `undefined` for any other error.
 */
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
 * Whether a command that failed with `error` may have run on the server: not
 * when Redis refused it ({@linkcode refusal}), nor when the client refused to
 * send it (node-redis offline or closed, ioredis without its offline queue,
 * a client that threw instead of answering). Any other error (a connection
 * that broke under the command) may hide a run.
 */
export function mayHaveRun(error: unknown): boolean {
  if (Object(error) === error && refused.has(error as object)) return false;
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== "string") return true;
  return !(refusal(error) || message === "The client is offline" ||
    message === "The client is closed" ||
    message.includes("enableOfflineQueue options is false"));
}

/** Sends `WAIT replicas timeout` on the connection that serves `key`. */
export type Wait = (
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
export function waiter(client: RedisClientLike, send: Send): Wait {
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
