// Copyright 2026 the @idempotent/http authors. MIT license.
/** The guarded request: its body read once, scope, fingerprint and rebuild. @module */

import { bodyInit, concatBytes, denoState, EMPTY } from "./_bytes.ts";
import { type Hasher, jsonFingerprint } from "./fingerprint.ts";
import type { Config } from "./_configure.ts";

/** Why {@linkcode readBody} returned no bytes. */
export type Unread =
  | { outcome: "too_large" }
  | { outcome: "failed"; error: unknown };
const TOO_LARGE: Unread = Object.freeze({ outcome: "too_large" });

/**
 * The request body, at most `max` bytes counted as they arrive (see
 * docs/architecture.md, Bounded memory); a stream that errors is `failed`.
 */
export async function readBody(
  request: Request,
  max: number,
): Promise<Uint8Array<ArrayBuffer> | Unread> {
  if (request.bodyUsed) {
    throw new TypeError(
      "The request body was read before idempotency(): read it in the handler",
    );
  }
  const declared = request.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared)) {
    const length = Number(declared);
    if (length > max) {
      await request.body?.cancel().catch(() => {});
      return TOO_LARGE;
    }
    if (served(request)) return await wholeBody(request, length);
  }
  const body = request.body;
  if (body === null) return EMPTY;
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > max) {
        await reader.cancel().catch(() => {});
        return TOO_LARGE;
      }
      chunks.push(value);
    }
  } catch (error) {
    reader.releaseLock();
    return { outcome: "failed", error };
  }
  if (chunks.length === 1 && chunks[0]!.buffer instanceof ArrayBuffer) {
    return chunks[0] as Uint8Array<ArrayBuffer>;
  }
  return concatBytes(chunks, total);
}

/**
 * A served body of `length` bytes read in one call: `Deno.serve` ends it at
 * its `Content-Length` and errors it when the client stops short, so the bound
 * holds (docs/architecture.md, Bounded memory); a length other than declared
 * is `failed` all the same.
 */
async function wholeBody(
  request: Request,
  length: number,
): Promise<Uint8Array<ArrayBuffer> | Unread> {
  let bytes: Uint8Array;
  try {
    bytes = await request.bytes();
  } catch (error) {
    return { outcome: "failed", error };
  }
  if (bytes.byteLength === length) return bytes as Uint8Array<ArrayBuffer>;
  const error = new RangeError(
    `The body has ${bytes.byteLength} bytes, its Content-Length says ${length}`,
  );
  return { outcome: "failed", error };
}

/**
 * Whether `Deno.serve` made the request (its state is the server's own
 * class), not code that could pair any stream with any `Content-Length`.
 */
export function served(request: Request): boolean {
  const state = denoState(request, "request") as object | undefined;
  return state?.constructor?.name === "InnerRequest";
}

/** The `scope` option's answer ("" for `"global"`); synchronous when it is. */
export function scopeOf(
  request: Request,
  scope: ((request: Request) => string | Promise<string>) | undefined,
): string | Promise<string> {
  if (scope === undefined) return "";
  const id = scope(request);
  return typeof id === "string" && id !== "" ? id : checkedScope(id);
}

/** Not `""`, `"global"`'s (docs/architecture.md, Scoped hashed slots). */
async function checkedScope(found: string | Promise<string>): Promise<string> {
  const id = returnedString("scope", await found);
  if (id !== "") return id;
  throw new TypeError(
    `'scope' must not return "", the key space of "global": return the stable id of the principal the request acts for, or pass scope: "global"`,
  );
}

function returnedString(option: string, value: unknown): string {
  if (typeof value === "string") return value;
  throw new TypeError(`'${option}' must return a string: it returned ${value}`);
}

/** The `key` option's answer: a key to check, `undefined` (none), or why it failed. */
export async function keyFrom(
  key: NonNullable<Config["key"]>,
  request: Request,
  body: Uint8Array,
): Promise<string | undefined | { error: Error }> {
  let value: unknown;
  try {
    value = await key(request, body);
  } catch (error) {
    return { error: new Error("'key' threw", { cause: error }) };
  }
  if (value === undefined || typeof value === "string") return value;
  const what = value === null ? "null" : `a value of type ${typeof value}`;
  const message =
    `'key' must return a string or undefined: it returned ${what}`;
  return { error: new TypeError(message) };
}

/** The `fingerprint` option's value hashed, else the default (method upper-cased). */
export function fingerprintOf(
  request: Request,
  body: Uint8Array<ArrayBuffer>,
  { fingerprint, hasher }: Pick<Config, "fingerprint" | "hasher">,
): string | Promise<string> {
  const method = request.method.toUpperCase();
  if (fingerprint === jsonFingerprint) {
    return hasher.json(method, request.url, body);
  }
  if (fingerprint !== undefined) {
    return customFingerprint(fingerprint, request, body, hasher);
  }
  return hasher.request(method, request.url, body);
}

/** Hashed, so that a store keeps 64 hex characters, never request data. */
async function customFingerprint(
  fingerprint: (request: Request, body: Uint8Array) => string | Promise<string>,
  request: Request,
  body: Uint8Array,
  hasher: Hasher,
): Promise<string> {
  return hasher.custom(
    returnedString("fingerprint", await fingerprint(request, body)),
  );
}

/** Where a rebuilt request keeps the original, for its `signal`. */
const ORIGINAL = Symbol("idempotency original request");

/** The original's `signal`: one getter for all, so V8 keeps one hidden class. */
const SIGNAL: PropertyDescriptor = {
  configurable: true,
  enumerable: true,
  get(this: { [ORIGINAL]: Request }): AbortSignal {
    return this[ORIGINAL].signal;
  },
};

/**
 * The request the handler sees: the same URL, method, headers and bytes; its
 * `signal` read lazily (`Deno.serve` warns when one is touched).
 */
export function rebuild(
  request: Request,
  body: Uint8Array<ArrayBuffer>,
): Request {
  const headers = headerInit(request.headers);
  const typed = headers instanceof Headers
    ? headers.has("content-type")
    : headers["content-type"] !== undefined;
  const init: RequestInit = {
    method: request.method,
    headers,
    body: body.byteLength === 0 ? null : bodyInit(body, typed),
  };
  const redirect = request.redirect;
  if (redirect !== "follow") init.redirect = redirect;
  const forward = new Request(request.url, init);
  (forward as unknown as { [ORIGINAL]: Request })[ORIGINAL] = request;
  Object.defineProperty(forward, "signal", SIGNAL);
  return forward;
}

/** The headers as a record (faster for `new Request()`), unless a name repeats. */
function headerInit(headers: Headers): Headers | Record<string, string> {
  const record: Record<string, string> = Object.create(null);
  let repeated = false;
  headers.forEach((value, name) => {
    if (record[name] !== undefined) repeated = true;
    record[name] = value;
  });
  return repeated ? headers : record;
}
