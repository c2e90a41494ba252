// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The guarded request: its body read once and bounded, its scope and
 * fingerprint, and the request rebuilt for the handler with the same bytes.
 *
 * @module
 */

import { bodyInit, concatBytes } from "./_bytes.ts";
import { sha256Hex } from "./_sha256.ts";
import { codeUnits, requestFingerprint } from "./fingerprint.ts";

/** An empty body, shared. */
export const EMPTY: Uint8Array<ArrayBuffer> = new Uint8Array(0);

/** What {@linkcode readBody} found when it could not return the bytes. */
export type Unread =
  | { outcome: "too_large" }
  | { outcome: "failed"; error: unknown };
const TOO_LARGE: Unread = Object.freeze({ outcome: "too_large" });

/**
 * Reads the request body, counting the bytes the stream yields: at most `max`
 * of them are buffered, whatever `Content-Length` says (a `Request` built in
 * process may declare less than its stream holds). A declared length over
 * the bound is refused without reading. A stream that errors before its end
 * (an upload cut off, broken chunked framing) is `failed`, never a throw.
 *
 * @param request The guarded request, its body unread.
 * @param max The most bytes buffered.
 * @returns The bytes, or why they could not be read.
 * @throws {TypeError} When the body was read before the middleware: a
 * programming error, not the client's.
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
  if (declared !== null && Number(declared) > max && /^\d+$/.test(declared)) {
    await request.body?.cancel().catch(() => {});
    return TOO_LARGE;
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
 * The request's scope, as the `scope` option returns it ("" for `"global"`);
 * synchronous when the option is.
 *
 * @param request The guarded request.
 * @param scope The `scope` option.
 * @returns The scope.
 * @throws {TypeError} When `scope` returns something else than a string.
 */
export function scopeOf(
  request: Request,
  scope: ((request: Request) => string | Promise<string>) | undefined,
): string | Promise<string> {
  if (scope === undefined) return "";
  const found = scope(request);
  return typeof found === "string" ? found : checkedScope(found);
}

async function checkedScope(found: Promise<string>): Promise<string> {
  const value = await found;
  if (typeof value !== "string") {
    throw new TypeError(`'scope' must return a string: it returned ${value}`);
  }
  return value;
}

/**
 * The request's fingerprint: the `fingerprint` option's value, hashed, or
 * by default {@linkcode requestFingerprint} of the method (in upper case:
 * `patch` and `PATCH` are one guarded method), URL and body; synchronous
 * when that is.
 *
 * @param request The guarded request.
 * @param body Its body.
 * @param custom The `fingerprint` option.
 * @returns The fingerprint: 64 hex characters.
 * @throws {TypeError} When `custom` returns something else than a string.
 */
export function fingerprintOf(
  request: Request,
  body: Uint8Array<ArrayBuffer>,
  custom:
    | ((request: Request, body: Uint8Array) => string | Promise<string>)
    | undefined,
): string | Promise<string> {
  if (custom !== undefined) return customFingerprint(custom, request, body);
  return requestFingerprint(request.method.toUpperCase(), request.url, body);
}

/**
 * Runs a `fingerprint` option and hashes what it returns, so that a store
 * only ever keeps 64 hex characters: never request data, whatever the
 * function returns, and never more than a store's value limit.
 */
async function customFingerprint(
  fingerprint: (request: Request, body: Uint8Array) => string | Promise<string>,
  request: Request,
  body: Uint8Array,
): Promise<string> {
  const value = await fingerprint(request, body);
  if (typeof value !== "string") {
    throw new TypeError(
      `'fingerprint' must return a string: it returned ${value}`,
    );
  }
  // Hashed like a slot: UTF-8 when well formed, UTF-16 code units (under
  // another prefix) when not, so two values never share a fingerprint.
  return value.isWellFormed()
    ? sha256Hex("idempotency-fingerprint\n", value)
    : sha256Hex("idempotency-fingerprint-utf16\n", codeUnits(value));
}

/** Where a rebuilt request keeps the original, for its `signal`. */
const ORIGINAL = Symbol("idempotency original request");

/**
 * The rebuilt request's `signal`: the original's. One getter shared by every
 * rebuilt request, so that V8 gives them all one hidden class (a closure per
 * request would give each request a class of its own).
 */
const SIGNAL: PropertyDescriptor = {
  configurable: true,
  enumerable: true,
  get(this: { [ORIGINAL]: Request }): AbortSignal {
    return this[ORIGINAL].signal;
  },
};

/**
 * The request the handler sees: the same URL, method, headers and bytes.
 * Its `signal` is the original's, read only when the handler reads it (under
 * `Deno.serve`, touching a request's signal prints a warning).
 *
 * @param request The guarded request, its body read.
 * @param body Its bytes.
 * @returns The request to hand the handler.
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

/**
 * The headers as a record, which `new Request()` converts faster than it
 * iterates a `Headers` object; the `Headers` themselves when a name repeats
 * (`set-cookie`, the one `Headers` does not combine).
 */
function headerInit(headers: Headers): Headers | Record<string, string> {
  const record: Record<string, string> = Object.create(null);
  let repeated = false;
  headers.forEach((value, name) => {
    if (record[name] !== undefined) repeated = true;
    record[name] = value;
  });
  return repeated ? headers : record;
}
