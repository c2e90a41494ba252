// Copyright 2026 the @idempotent/http authors. MIT license.
/** KvStore's record layout: values, chunks and their checks; no Deno KV calls. @module */

import type { StoredResponse } from "../store.ts";
import {
  decodeHeaders,
  encodeHeaders,
  isHeaderList,
  isOmittedReason,
  isStatus,
  RECORD_VERSION,
  toStoredResponse,
} from "../_record.ts";
import { concatBytes } from "../_bytes.ts";

/** Bytes of one body chunk: the most one Deno KV value may hold. */
export const CHUNK_BYTES = 65_536;
/** The record's serialized size, estimated, up to which the body is kept inline. */
const INLINE_BUDGET = 60 * 1024;
/** Mutation bytes per chunk commit, under Deno KV's 819,200. */
const COMMIT_BUDGET = 780_000;
/** Keys per `getMany` (Deno KV's limit is 10). */
export const GET_MANY = 10;
/** Chunk keys read at once: 8 `getMany` calls, 5 MiB of body. */
export const READ_WINDOW = 8 * GET_MANY;
/** How much longer than its record a chunk lives, against clock skew. */
export const CHUNK_SLACK_MS = 60_000;

interface RecordBase {
  v: number;
  fp: string;
  token: string;
  leaseUntil: number;
  deadline: number;
}

/** A claim in flight. */
export interface InFlightRecord extends RecordBase {
  state: "in_flight";
}

/** A completed record whose header list and body live in the record itself. */
export interface InlineRecord extends RecordBase {
  state: "completed";
  status: number;
  headers: [string, string][];
  body: Uint8Array | null;
  omitted?: string;
}

/** A completed record whose header JSON, then body, fill `chunks` chunk values. */
export interface ChunkedRecord extends RecordBase {
  state: "completed";
  status: number;
  set: string;
  chunks: number;
  headersLength: number;
  bodyLength: number | null;
  omitted?: string;
}

/** A record as KvStore writes it. */
export type KvRecord = InFlightRecord | InlineRecord | ChunkedRecord;

/** A copy of `bytes` that owns its buffer: a view would serialize it whole. */
function tight(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset === 0 &&
      bytes.byteLength === bytes.buffer.byteLength &&
      bytes.buffer instanceof ArrayBuffer
    ? bytes
    : bytes.slice();
}

/** `head` then `body` in chunks: views, but a copy for the one that straddles both. */
function pack(head: Uint8Array, body: Uint8Array | null): Uint8Array[] {
  const split = head.byteLength;
  const total = split + (body?.byteLength ?? 0);
  const parts: Uint8Array[] = [];
  for (let start = 0; start < total; start += CHUNK_BYTES) {
    const end = Math.min(start + CHUNK_BYTES, total);
    if (end <= split) {
      parts.push(head.subarray(start, end));
    } else if (start >= split) {
      parts.push(body!.subarray(start - split, end - split));
    } else {
      const part = new Uint8Array(end - start);
      part.set(head.subarray(start), 0);
      part.set(body!.subarray(0, end - split), split - start);
      parts.push(part);
    }
  }
  return parts;
}

// Upper bounds of serialized sizes (two-byte strings included).
function stringSize(text: string): number {
  return 2 * text.length + 8;
}

function inlineSize(owned: InFlightRecord, response: StoredResponse): number {
  let size = 256 + stringSize(owned.fp) + stringSize(owned.token);
  for (const [name, value] of response.headers) {
    size += stringSize(name) + stringSize(value) + 16;
  }
  return size + (response.body?.byteLength ?? 0);
}

function keySize(key: Deno.KvKey): number {
  let size = 0;
  for (const part of key) {
    size += typeof part === "string" ? 3 * part.length + 2 : 32;
  }
  return size;
}

function isRecordBase(value: Record<string, unknown>): boolean {
  return value.v === RECORD_VERSION && typeof value.fp === "string" &&
    typeof value.token === "string" && Number.isFinite(value.leaseUntil) &&
    Number.isFinite(value.deadline);
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/** The record in `value`, or `null` when it is not one this store wrote. */
export function parseRecord(value: unknown): KvRecord | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return null;
  }
  const r = value as Record<string, unknown>;
  if (!isRecordBase(r)) return null;
  if (r.state === "in_flight") return r as unknown as InFlightRecord;
  if (r.state !== "completed" || !isStatus(r.status)) return null;
  if (r.omitted !== undefined && !isOmittedReason(r.omitted)) return null;
  if (r.set === undefined) {
    if (!isHeaderList(r.headers)) return null;
    const bodyOk = r.body === null
      ? r.omitted !== undefined
      : r.body instanceof Uint8Array;
    return bodyOk ? r as unknown as InlineRecord : null;
  }
  if (
    typeof r.set !== "string" || !isCount(r.chunks) ||
    !isCount(r.headersLength) ||
    !(r.bodyLength === null ? r.omitted !== undefined : isCount(r.bodyLength))
  ) return null;
  // The count follows from the lengths: no reader fetches an absurd number.
  const total = (r.headersLength as number) +
    ((r.bodyLength as number | null) ?? 0);
  if (r.chunks !== Math.ceil(total / CHUNK_BYTES)) return null;
  return r as unknown as ChunkedRecord;
}

/** The completed record of `owned`: inline if it fits, else chunked, `parts` first. */
export function completion(
  owned: InFlightRecord,
  response: StoredResponse,
): { record: InlineRecord | ChunkedRecord; parts: Uint8Array[] } {
  const base = {
    v: RECORD_VERSION,
    state: "completed" as const,
    fp: owned.fp,
    token: owned.token,
    leaseUntil: owned.leaseUntil,
    deadline: owned.deadline,
    status: response.status,
    ...(response.omitted === undefined ? {} : { omitted: response.omitted }),
  };
  if (inlineSize(owned, response) <= INLINE_BUDGET) {
    return {
      record: {
        ...base,
        headers: response.headers.map(([n, v]) => [n, v]),
        body: response.body === null ? null : tight(response.body),
      },
      parts: [],
    };
  }
  const headerBytes = new TextEncoder().encode(
    encodeHeaders(response.headers),
  );
  const parts = pack(headerBytes, response.body);
  return {
    record: {
      ...base,
      set: crypto.randomUUID().slice(0, 8),
      chunks: parts.length,
      headersLength: headerBytes.byteLength,
      bodyLength: response.body === null ? null : response.body.byteLength,
    },
    parts,
  };
}

/** A chunked record's response from its chunk `values`, or `null` when torn. */
export function assemble(
  record: ChunkedRecord,
  values: readonly Uint8Array[],
  length: number,
): StoredResponse | null {
  if (length !== record.headersLength + (record.bodyLength ?? 0)) return null;
  const blob = concatBytes(values, length);
  let headerText: string;
  try {
    headerText = new TextDecoder("utf-8", { fatal: true }).decode(
      blob.subarray(0, record.headersLength),
    );
  } catch {
    return null;
  }
  const headers = decodeHeaders(headerText);
  if (headers === null) return null;
  const body = record.bodyLength === null
    ? null
    : blob.subarray(record.headersLength);
  return toStoredResponse(record.status, headers, body, record.omitted);
}

/** Groups chunk writes into commits under Deno KV's mutation limit: indices. */
export function commitGroups(
  keys: readonly Deno.KvKey[],
  parts: readonly Uint8Array[],
): number[][] {
  const groups: number[][] = [];
  let size = 0;
  for (const [i, part] of parts.entries()) {
    const cost = part.byteLength + keySize(keys[i]!);
    if (groups.length === 0 || size + cost > COMMIT_BUDGET) {
      groups.push([]);
      size = 0;
    }
    groups.at(-1)!.push(i);
    size += cost;
  }
  return groups;
}
