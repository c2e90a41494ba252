// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's record, one string per slot: a claim is the native `SET … NX
 * PX ttl GET`, a replay decodes its reply in place. An ASCII head (`idem`,
 * version `2`, state) tells it from other values; lengths are byte counts
 * that must match, else the value is unreadable:
 *
 * ```text
 * in flight:  idem2f <floor> ":" <token>
 * completed:  idem2c <status: 3 digits> <fp bytes> ":" <fp> <header bytes> ":" <headers JSON> (<body bytes> ":" <body> | <omitted reason> ":")
 * ```
 *
 * The lease runs while `PTTL > floor` (the server's clock). A token is 36
 * random characters and the fingerprint. A client answering text reads a
 * non-UTF-8 body as unreadable (in flight), never a mangled replay. @module
 */

import { Buffer } from "node:buffer";
import type { StoredResponse } from "../store.ts";
import { toStoredResponse } from "../_record.ts";

/** The head of an in-flight record. */
export const IN_FLIGHT = "idem2f";
/** The head of a completed record. */
export const COMPLETED = "idem2c";
/** How many characters of a token are its random id; the fingerprint follows. */
export const TOKEN_ID_LENGTH = 36;

const COLON = 0x3a;
const ZERO = 0x30;

/** A new token for a claim: a random id, then the fingerprint. */
export function newToken(fingerprint: string): string {
  return crypto.randomUUID() + fingerprint;
}

/** The in-flight record a claim writes with `SET … PX ttlMs`. */
export function inFlightRecord(
  token: string,
  leaseMs: number,
  ttlMs: number,
): string {
  return `${IN_FLIGHT}${ttlMs - leaseMs}:${token}`;
}

/**
 * The completed record for `response` claimed under `token` (the body copied
 * once), or `null` when `token` is too short to be ours.
 */
export function completedRecord(
  token: string,
  response: StoredResponse,
): Buffer | null {
  if (token.length < TOKEN_ID_LENGTH) return null;
  const fingerprint = token.slice(TOKEN_ID_LENGTH);
  const headers = JSON.stringify(response.headers);
  const head = `${COMPLETED}${response.status}${
    Buffer.byteLength(fingerprint)
  }:${fingerprint}${Buffer.byteLength(headers)}:${headers}${
    response.body === null ? response.omitted : response.body.byteLength
  }:`;
  const body = response.body;
  const bodyLength = body?.byteLength ?? 0;
  // Room for the head at its longest (3 bytes a UTF-16 unit), cut to size.
  const out = Buffer.allocUnsafe(head.length * 3 + bodyLength);
  const headLength = out.write(head, 0, "utf8");
  if (body !== null) out.set(body, headLength);
  return out.subarray(0, headLength + bodyLength);
}

/**
 * Reads a completed record (the body a view into `value`), or `null` for
 * anything else; never throws. Text is decoded as UTF-8 with replacement:
 * a header that is not UTF-8 fails the HTTP check.
 */
export function decodeCompleted(
  value: Uint8Array,
): { fingerprint: string; response: StoredResponse } | null {
  // Lengths are read from the bytes, not from strings: one decode a replay.
  const bytes = Buffer.isBuffer(value)
    ? value
    : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (bytes.toString("latin1", 0, 6) !== COMPLETED) return null;
  const status = value.length < 9 ? -1 : decimal(value, 6, 9);
  const fp = status < 0 ? null : field(value, 9);
  const hdr = fp && field(value, fp.end);
  if (fp === null || hdr === null) return null;
  let headers: unknown; // checked by toStoredResponse
  try {
    headers = JSON.parse(bytes.toString("utf8", hdr.start, hdr.end));
  } catch {
    return null;
  }
  // The body's length and the body, or the reason it was not kept and ":".
  const body = field(value, hdr.end);
  let response: StoredResponse | null = null;
  if (body === null) {
    const colon = bytes.indexOf(COLON, hdr.end);
    const omitted = bytes.toString("latin1", hdr.end, colon);
    if (colon === bytes.length - 1) {
      response = toStoredResponse(status, headers, null, omitted);
    }
  } else if (body.end === value.length) {
    const view = new Uint8Array(
      value.buffer,
      value.byteOffset + body.start,
      body.end - body.start,
    );
    response = toStoredResponse(status, headers, view, undefined);
  }
  const fingerprint = bytes.toString("utf8", fp.start, fp.end);
  return response && { fingerprint, response };
}

/** The decimal in `value[from, to)`, or -1. */
function decimal(value: Uint8Array, from: number, to: number): number {
  let n = 0;
  for (let at = from; at < to; at++) {
    const digit = value[at]! - ZERO;
    if (digit < 0 || digit > 9) return -1;
    n = n * 10 + digit;
  }
  return n;
}

/** Reads `<byte count, 1 to 9 digits> ":"` at `at`: the span that follows, or `null`. */
function field(
  value: Uint8Array,
  at: number,
): { start: number; end: number } | null {
  const colon = value.indexOf(COLON, at);
  const digits = colon - at;
  const length = digits > 0 && digits <= 9 ? decimal(value, at, colon) : -1;
  const end = colon + 1 + length;
  return length < 0 || end > value.length ? null : { start: colon + 1, end };
}
