// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Helpers that stores share to write and read records: the header list as
 * text, checks that tell a record of ours from a foreign or damaged value,
 * the answer for a value that fails them, and plain byte views.
 *
 * A store that reads something these checks reject reports the slot as
 * `in_flight` with `fingerprint: null` (docs/architecture.md, "Rules":
 * unreadable is in flight).
 *
 * @module
 */

import { TOKEN } from "./_validate.ts";
import { OMITTED_REASONS } from "./store.ts";
import type { ClaimResult, OmittedReason, StoredResponse } from "./store.ts";

/** The record format version every store writes; an unknown one is unreadable. */
export const RECORD_VERSION = 1;

/**
 * Encodes a header list as JSON text: an array of `[name, value]` pairs.
 *
 * @param headers The pairs, in order.
 * @returns The JSON text.
 */
export function encodeHeaders(headers: readonly [string, string][]): string {
  return JSON.stringify(headers);
}

/**
 * Decodes what {@linkcode encodeHeaders} wrote, or returns `null` for
 * anything else (never throws).
 *
 * @param text The stored text.
 * @returns The pairs, or `null`.
 */
export function decodeHeaders(text: unknown): [string, string][] | null {
  if (typeof text !== "string") return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  return isHeaderList(value) ? value : null;
}

/**
 * Tells whether `value` is an array of `[string, string]` pairs.
 *
 * @param value Anything.
 * @returns Whether it is a header list.
 */
export function isHeaderList(value: unknown): value is [string, string][] {
  if (!Array.isArray(value)) return false;
  for (const pair of value) {
    if (
      !Array.isArray(pair) || pair.length !== 2 ||
      typeof pair[0] !== "string" || typeof pair[1] !== "string"
    ) return false;
  }
  return true;
}

/**
 * RFC 9110 `field-value` characters: tab, space, visible ASCII and obs-text
 * (U+0080–U+00FF, sent as one Latin-1 byte). No NUL, CR, LF, other control
 * characters or DEL: `new Response()` throws on NUL, CR, LF and anything past
 * U+00FF, and `Deno.serve` (2.9) aborts the whole process when it writes a
 * response header that holds any other control character.
 */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Tells whether a header pair can be sent again as it is: the name an RFC
 * 9110 token, the value only tab, space, visible ASCII and obs-text.
 *
 * @param name The field name.
 * @param value The field value.
 * @returns Whether the pair is valid HTTP.
 */
export function isHeaderPair(name: string, value: string): boolean {
  return TOKEN.test(name) && FIELD_VALUE.test(value);
}

/**
 * Tells whether `value` is a list of header pairs that a replay can send:
 * a {@linkcode isHeaderList} whose every pair passes {@linkcode isHeaderPair}.
 * The check a decoded record goes through, once, before a store hands it out.
 *
 * @param value Anything.
 * @returns Whether it is such a list.
 */
export function isReplayableHeaderList(
  value: unknown,
): value is [string, string][] {
  return isHeaderList(value) &&
    value.every((pair) => isHeaderPair(pair[0], pair[1]));
}

/**
 * Tells whether `value` is an HTTP status a record may hold (200–599).
 *
 * @param value Anything.
 * @returns Whether it is such a status.
 */
export function isStatus(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 200 &&
    (value as number) <= 599;
}

/**
 * Tells whether `value` is one of the {@linkcode OmittedReason}s.
 *
 * @param value Anything.
 * @returns Whether it is a reason.
 */
export function isOmittedReason(value: unknown): value is OmittedReason {
  return (OMITTED_REASONS as readonly unknown[]).includes(value);
}

/**
 * Checks a response handed to `complete` and throws a `TypeError` naming the
 * first thing wrong with it: a status outside 200–599, a header list that is
 * not string pairs or holds a pair that is not valid HTTP (so that no store
 * keeps a record it could not replay), a body that is neither bytes nor
 * `null`, or an `omitted` reason that does not match the body.
 *
 * @param response The response to check.
 */
export function assertStoredResponse(response: StoredResponse): void {
  if (!isStatus(response?.status)) {
    throw new TypeError(
      `'response.status' must be an integer from 200 to 599: current value is ${response?.status}`,
    );
  }
  if (!isHeaderList(response.headers)) {
    throw new TypeError(
      "'response.headers' must be a list of [name, value] string pairs",
    );
  }
  for (const [name, value] of response.headers) {
    if (!isHeaderPair(name, value)) {
      throw new TypeError(
        `'response.headers' must hold valid HTTP header pairs: current pair is ${
          JSON.stringify([name, value])
        }`,
      );
    }
  }
  if (response.body === null) {
    if (!isOmittedReason(response.omitted)) {
      throw new TypeError(
        `'response.omitted' must say why the body is null: current value is ${response.omitted}`,
      );
    }
  } else if (!(response.body instanceof Uint8Array)) {
    throw new TypeError("'response.body' must be a Uint8Array or null");
  } else if (response.omitted !== undefined) {
    throw new TypeError(
      "'response.omitted' must be absent when the body is present",
    );
  }
}

/**
 * Builds a record from decoded parts, or returns `null` when the parts are
 * not a record of ours: a status outside 200–599, headers that are not
 * replayable (see {@linkcode isReplayableHeaderList}: a damaged record must
 * read as in flight, not make `new Response()` throw on every retry), or a
 * body and reason that do not match. Every store's read path ends here.
 *
 * @param status The decoded status.
 * @param headers The decoded header list.
 * @param body The decoded body, or `null`.
 * @param omitted The decoded reason, when the body is `null`.
 * @returns The record, or `null`.
 */
export function toStoredResponse(
  status: unknown,
  headers: unknown,
  body: Uint8Array | null,
  omitted: unknown,
): StoredResponse | null {
  if (!isStatus(status) || !isReplayableHeaderList(headers)) return null;
  if (body === null) {
    if (!isOmittedReason(omitted)) return null;
    return { status, headers, body: null, omitted };
  }
  if (omitted !== undefined && omitted !== null && omitted !== "") return null;
  return { status, headers, body };
}

/**
 * What a claim answers for a value it cannot read: in flight, owner unknown,
 * with a retry hint of at least 1 ms, rounded up to whole milliseconds.
 *
 * @param retryAfterMs The hint: what is left of the value's life, or a lease.
 * @returns The `in_flight` result.
 */
export function unreadable(retryAfterMs: number): ClaimResult {
  return {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)),
  };
}

/**
 * A plain `Uint8Array` over the same memory as `value` (a Node `Buffer`
 * from a driver, say), or `null` when `value` holds no bytes.
 *
 * @param value Anything.
 * @returns The view, or `null`.
 */
export function byteView(value: unknown): Uint8Array | null {
  if (!(value instanceof Uint8Array)) return null;
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}
