// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What stores share to write and read records; a value these checks reject is
 * unreadable (docs/architecture.md, Unreadable is in flight). @module
 */

import { TOKEN } from "./_validate.ts";
import { OMITTED_REASONS } from "./stores/_shared.ts";
import type { ClaimResult, OmittedReason, StoredResponse } from "./store.ts";

/** The record format version every store writes; an unknown one is unreadable. */
export const RECORD_VERSION = 1;

/** A header list as JSON text. */
export function encodeHeaders(headers: readonly [string, string][]): string {
  return JSON.stringify(headers);
}

/** What {@linkcode encodeHeaders} wrote, or `null` for anything else. */
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

/** Whether `value` is an array of `[string, string]` pairs. */
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

/** RFC 9110 `field-value`: `new Response()` throws on NUL, CR, LF; `Deno.serve` (2.9) aborts on other controls. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Whether a header pair can be sent again as it is. */
export function isHeaderPair(name: string, value: string): boolean {
  return TOKEN.test(name) && FIELD_VALUE.test(value);
}

/** Whether `value` is a status a record may hold (200–599). */
export function isStatus(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 200 &&
    (value as number) <= 599;
}

/** Whether `value` is an {@linkcode OmittedReason}. */
export function isOmittedReason(value: unknown): value is OmittedReason {
  return (OMITTED_REASONS as readonly unknown[]).includes(value);
}

/** Throws a `TypeError` naming what is wrong with a response given to `complete`. */
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

/** A record from decoded parts, or `null` when they are not one of ours. */
export function toStoredResponse(
  status: unknown,
  headers: unknown,
  body: Uint8Array | null,
  omitted: unknown,
): StoredResponse | null {
  if (
    !isStatus(status) || !isHeaderList(headers) ||
    !headers.every((pair) => isHeaderPair(pair[0], pair[1]))
  ) return null;
  if (body === null) {
    if (!isOmittedReason(omitted)) return null;
    return { status, headers, body: null, omitted };
  }
  if (omitted !== undefined && omitted !== null && omitted !== "") return null;
  return { status, headers, body };
}

/** A claim's answer for a value it cannot read, the hint at least 1 ms. */
export function unreadable(retryAfterMs: number): ClaimResult {
  return {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)),
  };
}

/** A plain `Uint8Array` over `value`'s memory (a driver's `Buffer`), or `null`. */
export function byteView(value: unknown): Uint8Array | null {
  if (!(value instanceof Uint8Array)) return null;
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}
