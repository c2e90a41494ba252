// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's record: one Redis string per slot, so that a claim can be the
 * native `SET key value NX PX ttl GET` (no script), and a replay decodes the
 * reply in place, the body a view into it.
 *
 * Two shapes, both starting with an ASCII head that tells them from any
 * other value (`idem`, the layout version `2`, then the state):
 *
 * ```text
 * in flight:  idem2f <floor> ":" <token>
 * completed:  idem2c <status: 3 digits> <fp bytes> ":" <fp> <header bytes> ":" <headers JSON> <body bytes> ":" <body>
 *             idem2c <status: 3 digits> <fp bytes> ":" <fp> <header bytes> ":" <headers JSON> <omitted reason> ":"
 * ```
 *
 * - The deadline is the key's own expiry (`PX ttl` at the claim, kept by
 *   every later write), so a record past its deadline is absent: Redis
 *   removes it, and a claim finds the slot free.
 * - The lease is carried by the expiry too. `<floor>` is the key's `PTTL` at
 *   which the lease ends: the lease runs while `PTTL > floor`. A claim that
 *   sets the key with `PX ttl` writes `floor = ttl - lease`, which it knows
 *   without any clock; `extend` writes `PTTL - lease`. So every lease is on
 *   the server's clock, as the expiry is.
 * - The token is the claim's random id (36 characters) followed by the
 *   claim's fingerprint: `complete()` gets no fingerprint, and builds the
 *   completed record (fingerprint included) from its token alone. The
 *   completion is fenced by the whole token.
 * - Lengths are byte counts in decimal, and must match: a value cut short
 *   or run long is unreadable. A body is kept as it is, binary or not; a
 *   body that was not kept leaves the reason (`too_large`, …) in place of
 *   its length.
 * - Everything before the body is UTF-8 text. A client that answers bulk
 *   strings as text (a `RedisCommander` not asked for bytes) still
 *   reads records whose body is UTF-8; one whose body is not then has another
 *   length than its record says, and reads as unreadable (in flight) until
 *   it expires: never a mangled replay.
 *
 * @module
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

/**
 * A new token for a claim with `fingerprint`: a random id of
 * {@linkcode TOKEN_ID_LENGTH} characters, then the fingerprint.
 *
 * @param fingerprint The claim's fingerprint.
 * @returns The token.
 */
export function newToken(fingerprint: string): string {
  return crypto.randomUUID() + fingerprint;
}

/**
 * The in-flight record a claim writes with `SET … PX ttlMs`: its lease ends
 * when the key's `PTTL` reaches `ttlMs - leaseMs`.
 *
 * @param token The claim's token (see {@linkcode newToken}).
 * @param leaseMs The lease.
 * @param ttlMs The TTL the key is set with.
 * @returns The value.
 */
export function inFlightRecord(
  token: string,
  leaseMs: number,
  ttlMs: number,
): string {
  return `${IN_FLIGHT}${ttlMs - leaseMs}:${token}`;
}

/**
 * The completed record for `response`, claimed under `token`, as one buffer
 * (the body copied once, behind the head).
 *
 * @param token The claim's token, which carries its fingerprint.
 * @param response The response, already checked.
 * @returns The value, or `null` when `token` is too short to be ours.
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
 * Reads a completed record, or returns `null` for anything else: another
 * head, a length that does not fit, or parts {@linkcode toStoredResponse}
 * rejects. Never throws. The body is a view into `value`. Text is decoded as
 * UTF-8 with replacement: a header that is not UTF-8 fails the HTTP check.
 *
 * @param value The record's bytes.
 * @returns The fingerprint and response, or `null`.
 */
export function decodeCompleted(
  value: Uint8Array,
): { fingerprint: string; response: StoredResponse } | null {
  const bytes = Buffer.isBuffer(value)
    ? value
    : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const status = bytes.toString("latin1", 6, 9);
  if (bytes.toString("latin1", 0, 6) !== COMPLETED) return null;
  const fp = /^\d{3}$/.test(status) ? field(bytes, 9) : null;
  const hdr = fp && field(bytes, fp.end);
  if (fp === null || hdr === null) return null;
  let headers: unknown;
  try {
    headers = JSON.parse(bytes.toString("utf8", hdr.start, hdr.end));
  } catch {
    return null;
  }
  // The body's length and the body, or the reason it was not kept and ":".
  const body = field(bytes, hdr.end);
  let response: StoredResponse | null = null;
  if (body === null) {
    const colon = bytes.indexOf(COLON, hdr.end);
    const omitted = bytes.toString("latin1", hdr.end, colon);
    if (colon === bytes.length - 1) {
      response = toStoredResponse(+status, headers, null, omitted);
    }
  } else if (body.end === bytes.length) {
    const view = new Uint8Array(
      bytes.buffer,
      bytes.byteOffset + body.start,
      body.end - body.start,
    );
    response = toStoredResponse(+status, headers, view, undefined);
  }
  const fingerprint = bytes.toString("utf8", fp.start, fp.end);
  return response && { fingerprint, response };
}

/**
 * Reads `<byte count> ":"` at `at`: where the text that follows starts and
 * ends, or `null` when the count is malformed or runs past the value.
 */
function field(
  bytes: Buffer,
  at: number,
): { start: number; end: number } | null {
  const colon = bytes.indexOf(COLON, at);
  if (colon < 0 || !/^\d{1,9}$/.test(bytes.toString("latin1", at, colon))) {
    return null;
  }
  const end = colon + 1 + Number(bytes.toString("latin1", at, colon));
  return end > bytes.length ? null : { start: colon + 1, end };
}
