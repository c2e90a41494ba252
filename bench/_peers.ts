// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The subjects the `*_compare.ts` and `growth.ts` scripts measure side by
 * side: one of our stores driven as the middleware drives it, and the two
 * peers a user would otherwise pick, each on a node-redis connection of its
 * own, all for one request body.
 *
 * What one "request" is for each:
 *
 * - a store of ours: the slot of the key and the fingerprint of the request
 *   (the middleware's own `slotOf` and `requestFingerprint`: SHA-256 in
 *   JavaScript, `crypto.subtle` for a body from 8 KiB), claim, and for a
 *   fresh key complete with a status, a header and the body.
 * - Powertools: `makeIdempotent(fn, { persistenceStore: CachePersistenceLayer })`
 *   called with an event; it hashes the event (md5 of its JSON) and stores the
 *   function's JSON result.
 * - node-idempotency: `onRequest` (and `onResponse` for a fresh key) with a
 *   request object; it hashes the JSON body (blake2s) and stores the response
 *   as JSON, on its own node-redis 4 client.
 *
 * @module
 */

import { createClient } from "redis";
import {
  IdempotencyConfig,
  makeIdempotent,
} from "@aws-lambda-powertools/idempotency";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import { Idempotency } from "@node-idempotency/core";
import { RedisStorageAdapter } from "@node-idempotency/storage-adapter-redis";
import { requestFingerprint, slotOf } from "../src/fingerprint.ts";
import type { IdempotencyStore, StoredResponse } from "../src/store.ts";

/** One implementation, as a script measures it. */
export interface Subject {
  /** Its name in the tables. */
  name: string;
  /** What one request does, in a few words. */
  what: string;
  /** The connection to watch with MONITOR, if any: its CLIENT INFO. */
  address?: () => Promise<string>;
  /** One request with key `key`, the first time it is seen. */
  fresh(key: string): Promise<unknown>;
  /** Prepares `key` so that `replay(key)` is a replay. */
  prime(key: string): Promise<unknown>;
  /** One request replaying `key`. */
  replay(key: string): Promise<unknown>;
  /** Closes what it opened. */
  close(): Promise<void> | void;
}

/** The claim's lease and time to live in every script. */
export const CLAIM = { leaseMs: 30_000, ttlMs: 3_600_000 };

/**
 * The JSON request body of `bytes` bytes (ASCII, so characters are bytes),
 * or the small payment body of the peer table when `bytes` is not given.
 *
 * @param bytes The body's length.
 * @returns The body.
 */
export function jsonBody(bytes?: number): string {
  const small = '{"id":"pay_123","amount":1000,"currency":"eur"}';
  if (bytes === undefined) return small;
  const frame = '{"id":"pay_123","data":""}';
  return `{"id":"pay_123","data":"${
    "x".repeat(Math.max(0, bytes - frame.length))
  }"}`;
}

/**
 * The CLIENT INFO address of a connection, to match MONITOR lines.
 *
 * @param send Sends one command on the connection.
 * @returns Its `addr`.
 */
export async function clientAddress(
  send: (args: string[]) => Promise<unknown>,
): Promise<string> {
  const info = String(await send(["CLIENT", "INFO"]));
  return /(?:^| )addr=(\S+)/.exec(info)![1]!;
}

/**
 * One of our stores, driven as the middleware drives it for `body`.
 *
 * @param name Its name in the tables.
 * @param what What one request does.
 * @param store The store.
 * @param body The request body, stored as the response body too.
 * @param close Closes what the store uses.
 * @param address Its connection's CLIENT INFO address, if on Redis.
 * @returns The subject.
 */
export function storeSubject(
  name: string,
  what: string,
  store: IdempotencyStore,
  body: string,
  close: () => Promise<void> | void,
  address?: () => Promise<string>,
): Subject {
  const bytes = new TextEncoder().encode(body);
  const response: StoredResponse = {
    status: 201,
    headers: [["content-type", "application/json"]],
    body: bytes,
  };
  const request = async (key: string) => {
    const slot = slotOf("scope", key);
    const hashed = requestFingerprint("POST", "http://app.test/pay", bytes);
    const fingerprint = typeof hashed === "string" ? hashed : await hashed;
    const claim = await store.claim(slot, { fingerprint, ...CLAIM });
    if (claim.state === "acquired") {
      const done = await store.complete(slot, claim.token, response);
      if (done !== "applied") throw new Error(`${name}: complete ${done}`);
      return "fresh";
    }
    if (claim.state === "completed") return claim.response;
    throw new Error(`${name}: ${claim.state}`);
  };
  return {
    name,
    what,
    ...(address ? { address } : {}),
    fresh: request,
    prime: request,
    replay: request,
    close,
  };
}

/**
 * Powertools' `makeIdempotent` on a node-redis connection of its own.
 *
 * @param url The Redis URL.
 * @param prefix Its key prefix.
 * @param body The event's body, returned as the result's body.
 * @returns The subject.
 */
export async function powertoolsSubject(
  url: string,
  prefix: string,
  body: string,
): Promise<Subject> {
  const client = await createClient({ url }).connect();
  const config = new IdempotencyConfig({ expiresAfterSeconds: 3600 });
  config.registerLambdaContext(
    { getRemainingTimeInMillis: () => 60_000 } as never,
  );
  const pt = makeIdempotent(
    (event: { key: string; body: string }) =>
      Promise.resolve({ status: 201, body: event.body }),
    {
      persistenceStore: new CachePersistenceLayer({ client: client as never }),
      config,
      keyPrefix: prefix,
    },
  );
  const request = (key: string) => pt({ key, body });
  return {
    name: "Powertools 2.35.0 (CachePersistenceLayer)",
    what: "SET NX + SET; replay GET; JSON result, no fencing/lease renewal",
    address: () => clientAddress((a) => client.sendCommand(a)),
    fresh: request,
    prime: request,
    replay: request,
    close: () => client.destroy(),
  };
}

/**
 * node-idempotency's `Idempotency` on its Redis adapter's own connection.
 *
 * @param url The Redis URL.
 * @param prefix Its key prefix.
 * @param body The JSON request body, answered as the response body too.
 * @returns The subject.
 */
export async function nodeIdempotencySubject(
  url: string,
  prefix: string,
  body: string,
): Promise<Subject> {
  const storage = new RedisStorageAdapter({ url } as never);
  await storage.connect();
  const ni = new Idempotency(storage, {
    cacheKeyPrefix: prefix,
    cacheTTLMS: 3_600_000,
  });
  const client = (storage as unknown as {
    client: { sendCommand(a: string[]): Promise<unknown> };
  }).client;
  const request = (key: string) => ({
    method: "POST",
    path: "/pay",
    headers: { "idempotency-key": key },
    body: JSON.parse(body),
  });
  const respond = (req: ReturnType<typeof request>) =>
    ni.onResponse(req, { body: JSON.parse(body), additional: { status: 201 } });
  return {
    name: "node-idempotency 1.0.11 (+ redis adapter 1.0.2)",
    what: "SET NX + SET; replay SET NX + GET; JSON body, no fencing/lease",
    address: () => clientAddress((a) => client.sendCommand(a)),
    fresh: async (key) => {
      const req = request(key);
      const cached = await ni.onRequest(req);
      if (cached !== undefined) throw new Error("node-idempotency: not fresh");
      await respond(req);
    },
    prime: async (key) => {
      const req = request(key);
      await ni.onRequest(req);
      await respond(req);
    },
    replay: async (key) => {
      const cached = await ni.onRequest(request(key));
      if (cached === undefined) throw new Error("node-idempotency: no replay");
    },
    close: () => storage.disconnect(),
  };
}
