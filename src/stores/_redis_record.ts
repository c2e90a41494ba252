// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's record: one Redis string per slot, so that a claim can be the
 * native `SET key value NX PX ttl GET` (no script), and a replay decodes the
 * reply in place, the body a view into it.
 *
 * Two layouts, both starting with an ASCII head that tells them from any
 * other value (`idem` and the layout version `2`, then the state):
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
 * The first layout (a hash per slot, version `1` in its `v` field) is only
 * read: a claim that meets one (Redis answers `WRONGTYPE` to the `SET … GET`)
 * goes through the claim script, which replays a completed hash, reads an
 * in-flight one as in flight, and takes the slot over (as a string) only when
 * the hash's own lease or deadline has passed. So records written before the
 * upgrade keep their meaning until they expire.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { StoredResponse } from "../store.ts";
import { toStoredResponse } from "../_record.ts";

/** What every record of this layout starts with: `idem`, then the version. */
export const HEAD = "idem2";
/** The head of an in-flight record. */
export const IN_FLIGHT = "idem2f";
/** The head of a completed record. */
export const COMPLETED = "idem2c";
/** How many characters of a token are its random id; the fingerprint follows. */
export const TOKEN_ID_LENGTH = 36;

const COLON = 0x3a;
const ZERO = 0x30;
const HEAD_BYTES = [0x69, 0x64, 0x65, 0x6d, 0x32, 0x63]; // "idem2c"

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
    utf8Length(fingerprint)
  }:${fingerprint}${utf8Length(headers)}:${headers}${
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
 * How many bytes `text` takes in UTF-8 (a lone surrogate as the 3 of
 * U+FFFD, which is what encoding writes for it), without encoding it.
 */
function utf8Length(text: string): number {
  let length = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    if (unit < 0x800) length += 1;
    else if (
      unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length &&
      (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00
    ) {
      length += 2; // a pair: 4 bytes for 2 units
      i++;
    } else length += 2;
  }
  return length;
}

/** Whether `value` starts with the head of a completed record. */
export function isCompleted(value: Uint8Array): boolean {
  if (value.length < HEAD_BYTES.length) return false;
  for (let i = 0; i < HEAD_BYTES.length; i++) {
    if (value[i] !== HEAD_BYTES[i]) return false;
  }
  return true;
}

/**
 * Reads a completed record (see the module doc), or returns `null` for
 * anything else: another head, a length that does not fit, or parts that
 * {@linkcode toStoredResponse} rejects. Never throws. The body is a view
 * into `value`. Text is decoded as UTF-8 with replacement: bytes that are
 * not UTF-8 in a header make it fail the HTTP check (unreadable), and the
 * store never writes such a fingerprint.
 *
 * @param value The record's bytes.
 * @returns The fingerprint and response, or `null`.
 */
export function decodeCompleted(
  value: Uint8Array,
): { fingerprint: string; response: StoredResponse } | null {
  if (!isCompleted(value) || value.length < HEAD_BYTES.length + 3) return null;
  let at = HEAD_BYTES.length;
  let status = 0;
  for (const end = at + 3; at < end; at++) {
    const digit = value[at]! - ZERO;
    if (digit < 0 || digit > 9) return null;
    status = status * 10 + digit;
  }
  const bytes = Buffer.isBuffer(value)
    ? value
    : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const fpEnd = fieldEnd(value, at);
  if (fpEnd < 0) return null;
  const fingerprint = bytes.toString("utf8", fpEnd - lastLength, fpEnd);
  const headersEnd = fieldEnd(value, fpEnd);
  if (headersEnd < 0) return null;
  const headersStart = headersEnd - lastLength;
  // The body's length or the reason: at most 16 bytes, then a colon.
  let colon = headersEnd;
  const limit = Math.min(value.length, headersEnd + 17);
  while (colon < limit && value[colon] !== COLON) colon++;
  if (colon === headersEnd || colon === limit) return null;
  let headers: unknown;
  try {
    headers = JSON.parse(bytes.toString("utf8", headersStart, headersEnd));
  } catch {
    return null;
  }
  let response: StoredResponse | null;
  const bodyLength = value.length - colon - 1;
  if (isDigit(value[headersEnd]!)) {
    if (fieldEnd(value, headersEnd) !== value.length) return null;
    const body = new Uint8Array(
      value.buffer,
      value.byteOffset + colon + 1,
      bodyLength,
    );
    response = toStoredResponse(status, headers, body, undefined);
  } else {
    const omitted = bytes.toString("latin1", headersEnd, colon);
    response = bodyLength === 0
      ? toStoredResponse(status, headers, null, omitted)
      : null;
  }
  return response === null ? null : { fingerprint, response };
}

function isDigit(byte: number): boolean {
  return byte >= ZERO && byte <= ZERO + 9;
}

/** The length read by the last {@linkcode fieldEnd}. */
let lastLength = 0;

/**
 * Reads `<byte length> ":"` at `at` and returns where the text that follows
 * ends (its length left in {@linkcode lastLength}), or -1 when the length is
 * malformed or runs past the value.
 */
function fieldEnd(value: Uint8Array, at: number): number {
  let length = 0;
  let digits = 0;
  for (; at < value.length && value[at] !== COLON; at++, digits++) {
    const digit = value[at]! - ZERO;
    if (digit < 0 || digit > 9 || digits === 9) return -1;
    length = length * 10 + digit;
  }
  if (digits === 0 || at >= value.length) return -1;
  const end = at + 1 + length;
  if (end > value.length) return -1;
  lastLength = length;
  return end;
}
