// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The SQL stores' one row layout, read and written: PostgreSQL, MySQL and
 * SQLite keep a record in the same columns (docs/architecture.md, Store
 * contract), so a claim's row, a peek's row and a completion's parameters
 * are read and made here once.
 * @module
 */

import type { ClaimResult, PeekResult, StoredResponse } from "../store.ts";
import { completedPeek, inFlightPeek } from "./_shared.ts";
import {
  byteView,
  decodeHeaders,
  encodeHeaders,
  RECORD_VERSION,
  toStoredResponse,
  unreadable,
} from "../_record.ts";

/** A row as the SQL drivers return it: column name to value. */
export type SqlRow = Record<string, unknown>;

const msOf = (value: unknown): number | null =>
  typeof value === "number" && Number.isFinite(value)
    ? Math.round(value)
    : null;

/** Reads the row of the `peek` statement, as `decodeClaim` would judge it. */
export function decodePeek(
  row: SqlRow | undefined,
  withResponse = false,
): PeekResult {
  if (row === undefined) return { state: "absent" };
  const expiresAt = msOf(row.expires_at);
  const fingerprint = row.fingerprint;
  if (
    row.version !== RECORD_VERSION || typeof fingerprint !== "string" ||
    expiresAt === null
  ) return { state: "unreadable", expiresAt };
  const claimedAt = msOf(row.claimed_at);
  const leaseExpiresAt = msOf(row.lease_expires_at);
  if (
    row.state === "in_flight" && row.has_token === true &&
    leaseExpiresAt !== null
  ) {
    return inFlightPeek(fingerprint, leaseExpiresAt, expiresAt, claimedAt);
  }
  const headers = decodeHeaders(row.headers);
  const size = row.body_bytes;
  const body = typeof size === "number" ? new Uint8Array(0) : null;
  const response = row.state === "completed"
    ? toStoredResponse(row.status, headers, body, row.omitted)
    : null;
  if (response === null) return { state: "unreadable", expiresAt };
  const full = withResponse
    ? toStoredResponse(
      response.status,
      response.headers,
      byteView(row.body),
      row.omitted,
    )
    : undefined;
  return completedPeek(
    fingerprint,
    {
      status: response.status,
      headerNames: response.headers.map(([name]) => name),
      bodyBytes: body === null ? null : size as number,
      omitted: response.omitted,
    },
    expiresAt,
    claimedAt,
    full ?? undefined,
  );
}

/** Reads the row that a claim offering `token` returned. */
export function decodeClaim(
  row: SqlRow | undefined,
  token: string,
): ClaimResult {
  if (row === undefined) return unreadable(1000);
  const retry = typeof row.retry_after_ms === "number"
    ? Math.max(1, row.retry_after_ms)
    : 1000;
  if (row.token === token) {
    return {
      state: "acquired",
      token,
      recovered: typeof row.takeovers === "number" && row.takeovers > 0,
    };
  }
  if (
    row.version !== RECORD_VERSION || typeof row.fingerprint !== "string" ||
    row.has_deadline !== true
  ) return unreadable(retry);
  const fingerprint = row.fingerprint;
  if (row.state === "in_flight" && typeof row.retry_after_ms === "number") {
    return { state: "in_flight", fingerprint, retryAfterMs: retry };
  }
  if (row.state === "completed") {
    const response = toStoredResponse(
      row.status,
      decodeHeaders(row.headers),
      byteView(row.body),
      row.omitted,
    );
    if (response !== null) {
      return { state: "completed", fingerprint, response };
    }
  }
  return unreadable(retry);
}

/** The parameters of the `complete` statement of `token`'s `response`. */
export function completeParams(
  slot: string,
  token: string,
  response: StoredResponse,
): (string | number | Uint8Array | null)[] {
  return [
    slot,
    String(token),
    response.status,
    encodeHeaders(response.headers),
    response.body,
    response.body === null ? response.omitted! : null,
  ];
}
