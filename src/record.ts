// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Helpers that stores share to write and read records: the header list as
 * text, and checks that tell a record of ours from a foreign or damaged value.
 *
 * A store that reads something these checks reject reports the slot as
 * `in_flight` with `fingerprint: null` (DESIGN rule 6: unreadable is in
 * flight).
 *
 * @module
 */

import { OMITTED_REASONS } from "./store.ts";
import type { OmittedReason, StoredResponse } from "./store.ts";

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
 * not string pairs, a body that is neither bytes nor `null`, or an `omitted`
 * reason that does not match the body.
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
 * not a record of ours.
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
  if (!isStatus(status) || !isHeaderList(headers)) return null;
  if (body === null) {
    if (!isOmittedReason(omitted)) return null;
    return { status, headers, body: null, omitted };
  }
  if (omitted !== undefined && omitted !== null && omitted !== "") return null;
  return { status, headers, body };
}
