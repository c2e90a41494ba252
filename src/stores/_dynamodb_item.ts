// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * DynamoDbStore's items: the attributes of a record and of a body's chunks,
 * the conditions that fence them, and items read back as the contract's
 * results (docs/dynamodb.md, "The item").
 *
 * @module
 */

import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import {
  byteView,
  decodeHeaders,
  encodeHeaders,
  RECORD_VERSION,
  toStoredResponse,
  unreadable,
} from "../_record.ts";
import type { ClaimResult, PeekResult, StoredResponse } from "../store.ts";
import { completedPeek, inFlightPeek, STORE_DROPPED } from "./_shared.ts";

/** An item as the SDK sends and returns it. */
export type Item = Record<string, AttributeValue>;

/**
 * At most this many bytes of slot, fingerprint, header JSON and body (UTF-8)
 * make one item; the item's other attributes take under 250 bytes, so that it
 * stays within DynamoDB's 400 KiB (409,600 bytes). A body that does not fit
 * goes to chunk items of at most this many bytes each.
 */
export const INLINE_BYTES = 399_360;
/** The most chunk items of one body (a bounded completion); a larger body is recorded without it, `store_dropped`. */
export const MAX_CHUNKS = 8;

/** The attribute DynamoDB's TTL deletes by: epoch seconds. */
export const TTL_ATTRIBUTE = "ttl";
/** The table's partition key, a string. */
export const KEY_ATTRIBUTE = "pk";

const n = (value: number): AttributeValue => ({ N: String(value) });
const s = (value: string): AttributeValue => ({ S: value });
const ttlOf = (expiresAt: number) => n(Math.ceil(expiresAt / 1000));

/**
 * Each `#name` of the expressions, aliased to the attribute `name` (all
 * aliased: `state`, `status` and `ttl` are reserved words; only the names
 * used may be sent).
 */
export function namesOf(...expressions: string[]): Record<string, string> {
  const used = expressions.join(" ").matchAll(/#(\w+)/g);
  return Object.fromEntries([...used].map(([alias, name]) => [alias, name!]));
}

/**
 * Free for a claim, judged at `:now`: absent, past its TTL, or a readable
 * claim whose lease ran out within its TTL; a value of another type makes it
 * not free (docs/architecture.md, Unreadable is in flight).
 */
export const FREE = `attribute_not_exists(#pk) OR #expires_at <= :now OR
  (#v = :v AND #state = :inflight AND attribute_type(#token, :S)
    AND attribute_type(#fingerprint, :S) AND #lease_until <= :now AND #expires_at > :now)`;

/** Still owned by `:tk`: the fence of complete, release and extend. */
export const FENCE =
  "#token = :tk AND #v = :v AND #state = :inflight AND #expires_at > :now";

/** The values {@linkcode FREE} and {@linkcode FENCE} compare with. */
export function conditionValues(now: number): Item {
  return {
    ":now": n(now),
    ":v": n(RECORD_VERSION),
    ":inflight": s("in_flight"),
  };
}

/**
 * The claim's token: random, then the record's expiry and its fingerprint's
 * length, so that a completion sizes the item and gives its chunks the
 * record's TTL without reading it (a token not ours fails the fence anyway).
 */
export function newToken(expiresAt: number, fingerprint: string): string {
  return `${crypto.randomUUID()}.${expiresAt}.${utf8(fingerprint)}`;
}

/** The expiry and fingerprint length a token of {@linkcode newToken} carries. */
function tokenFacts(token: string): { expiresAt: number; fpBytes: number } {
  const [, at, bytes] = token.split(".").map(Number);
  const whole = (x: number | undefined) => Number.isSafeInteger(x) ? x! : 0;
  return { expiresAt: whole(at), fpBytes: whole(bytes) };
}

/** The item a claim puts at `slot`. */
export function claimItem(
  slot: string,
  fingerprint: string,
  token: string,
  now: number,
  leaseMs: number,
  ttlMs: number,
): Item {
  const expiresAt = now + ttlMs;
  return {
    pk: s(slot),
    v: n(RECORD_VERSION),
    state: s("in_flight"),
    fingerprint: s(fingerprint),
    token: s(token),
    lease_until: n(now + leaseMs),
    expires_at: n(expiresAt),
    ttl: ttlOf(expiresAt),
    created_at: n(now),
  };
}

/** What a chunk item's key begins with (`#chunk#<token>#<index>`): no record's. */
export const CHUNK_PREFIX = "#chunk#";
function chunkKey(token: string, index: number): Item {
  return { pk: s(`${CHUNK_PREFIX}${token}#${index}`) };
}

const utf8 = (text: string) => new TextEncoder().encode(text).byteLength;

/**
 * The update that records `response` (its body inline when the record fits
 * {@linkcode INLINE_BYTES}, else in chunks, else dropped).
 *
 * @throws {RangeError} When the headers alone do not fit one item.
 */
export function completion(
  slot: string,
  token: string,
  response: StoredResponse,
): { update: string; values: Item; chunks: Item[] } {
  const headers = encodeHeaders(response.headers);
  const { expiresAt, fpBytes } = tokenFacts(token);
  const fixed = utf8(slot) + fpBytes + utf8(headers);
  if (fixed > INLINE_BYTES) {
    throw new RangeError(
      `DynamoDbStore cannot record ${fixed} bytes of slot, fingerprint and headers: at most ${INLINE_BYTES} fit one item`,
    );
  }
  const values: Item = {
    ":completed": s("completed"),
    ":sc": n(response.status),
    ":hd": s(headers),
  };
  const set = ["#state = :completed", "#status = :sc", "#headers = :hd"];
  const body = response.body;
  const chunks: Item[] = [];
  let omitted = response.omitted;
  if (body !== null && fixed + body.byteLength <= INLINE_BYTES) {
    set.push("#body = :bd");
    values[":bd"] = { B: body };
  } else if (body !== null && body.byteLength <= MAX_CHUNKS * INLINE_BYTES) {
    for (let at = 0; at < body.byteLength; at += INLINE_BYTES) {
      chunks.push({
        ...chunkKey(token, chunks.length),
        body: { B: body.subarray(at, at + INLINE_BYTES) },
        expires_at: n(expiresAt),
        ttl: ttlOf(expiresAt),
      });
    }
    set.push("#chunks = :nc", "#body_bytes = :bl");
    values[":nc"] = n(chunks.length);
    values[":bl"] = n(body.byteLength);
  } else if (body !== null) {
    omitted = STORE_DROPPED;
  }
  if (omitted !== undefined) {
    set.push("#omitted = :om");
    values[":om"] = s(omitted);
  }
  return {
    update: `SET ${set.join(", ")} REMOVE #lease_until`,
    values,
    chunks,
  };
}

const num = (value: AttributeValue | undefined): number | null => {
  const parsed = value?.N === undefined ? NaN : Number(value.N);
  return Number.isFinite(parsed) ? parsed : null;
};

type Times = "leaseUntil" | "expiresAt" | "createdAt";
type Fields =
  & Record<"version" | Times | "chunks" | "bodyBytes", number | null>
  & Record<"state" | "fingerprint" | "token", string | undefined>;

/** The fields of `item`, read without trusting their types. */
export function fieldsOf(item: Item): Fields {
  return {
    version: num(item.v),
    state: item.state?.S,
    fingerprint: item.fingerprint?.S,
    token: item.token?.S,
    leaseUntil: num(item.lease_until),
    expiresAt: num(item.expires_at),
    createdAt: num(item.created_at),
    chunks: num(item.chunks),
    bodyBytes: num(item.body_bytes),
  };
}

/** Whether a claim at `now` may take `item` (as {@linkcode FREE} judges it). */
export function isFree(item: Item | undefined, now: number): boolean {
  if (item === undefined) return true;
  const f = fieldsOf(item);
  if (f.expiresAt !== null && f.expiresAt <= now) return true;
  return f.version === RECORD_VERSION && f.state === "in_flight" &&
    f.token !== undefined && f.fingerprint !== undefined &&
    f.leaseUntil !== null && f.leaseUntil <= now && f.expiresAt !== null;
}

/** How many chunk items hold the body of a completed `item` (0: inline or none). */
export function chunksOf(item: Item): number {
  const { chunks, state, token } = fieldsOf(item);
  return state === "completed" && token !== undefined &&
      Number.isInteger(chunks) && chunks! > 0 && chunks! <= MAX_CHUNKS
    ? chunks!
    : 0;
}

/** The keys of the chunk items of a completed `item`'s body, in order. */
export function chunkKeys(item: Item): Item[] {
  const token = fieldsOf(item).token!;
  return Array.from({ length: chunksOf(item) }, (_, i) => chunkKey(token, i));
}

/** The body of `item`: inline, or its chunks' in order (all of it, or `null`). */
function bodyOf(item: Item, chunks: readonly Item[] | undefined) {
  if (!chunks?.length) return byteView(item.body?.B);
  const parts = chunks.map((chunk) => byteView(chunk.body?.B) ?? undefined);
  if (parts.includes(undefined)) return null;
  const body = new Uint8Array(parts.reduce((n, p) => n + p!.byteLength, 0));
  parts.reduce((at, part) => (body.set(part!, at), at + part!.byteLength), 0);
  return body.byteLength === fieldsOf(item).bodyBytes ? body : null;
}

/** The record a completed `item` holds, or `null` when it is not one of ours. */
function responseOf(item: Item, chunks?: readonly Item[]) {
  const headers = decodeHeaders(item.headers?.S);
  const body = bodyOf(item, chunks);
  return toStoredResponse(num(item.status), headers, body, item.omitted?.S);
}

/** Whether the fields are a record of ours with a deadline. */
const readable = (f: Fields): f is Fields & Record<"fingerprint", string> =>
  f.version === RECORD_VERSION && f.fingerprint !== undefined &&
  f.expiresAt !== null;
/** Whether a readable record is a claim (else it must be completed). */
const claimed = (f: Fields) =>
  f.state === "in_flight" && f.token !== undefined && f.leaseUntil !== null;

/** What a claim that found `item` (not free at `now`) answers. */
export function decodeClaim(
  item: Item,
  now: number,
  chunks?: readonly Item[],
): ClaimResult {
  const f = fieldsOf(item);
  const retry = f.leaseUntil === null ? 1000 : f.leaseUntil - now;
  if (!readable(f)) return unreadable(retry);
  const { fingerprint } = f;
  if (claimed(f)) {
    return {
      state: "in_flight",
      fingerprint,
      retryAfterMs: Math.max(1, retry),
    };
  }
  const response = f.state === "completed" ? responseOf(item, chunks) : null;
  if (response === null) return unreadable(retry);
  return { state: "completed", fingerprint, response };
}

/** What `peek` reports of `item` at `now` (`absent` past its TTL). */
export function decodePeek(
  item: Item | undefined,
  now: number,
  full: boolean,
  chunks?: readonly Item[],
): PeekResult {
  if (item === undefined) return { state: "absent" };
  const f = fieldsOf(item);
  if (f.expiresAt !== null && f.expiresAt <= now) return { state: "absent" };
  if (!readable(f)) return { state: "unreadable", expiresAt: f.expiresAt };
  if (claimed(f)) {
    return inFlightPeek(
      f.fingerprint,
      f.leaseUntil!,
      f.expiresAt!,
      f.createdAt,
    );
  }
  // Without its chunks read, a body's length is the record's `body_bytes`.
  const chunked = chunksOf(item) > 0;
  const stub = { ...item, body: { B: new Uint8Array(0) } };
  const found = f.state !== "completed"
    ? null
    : responseOf(chunked && chunks === undefined ? stub : item, chunks);
  if (found === null) return { state: "unreadable", expiresAt: f.expiresAt };
  const { status, headers, body, omitted } = found;
  const bodyBytes = body === null ? null : chunked ? f.bodyBytes : body.length;
  return completedPeek(
    f.fingerprint,
    {
      status,
      headerNames: headers.map(([header]) => header),
      bodyBytes,
      omitted,
    },
    f.expiresAt!,
    f.createdAt,
    full ? found : undefined,
  );
}
