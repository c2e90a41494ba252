// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Responses out of the middleware: a response's headers and body as a
 * record keeps them (with the live body the client gets when the record
 * keeps none), and the replay of a record.
 *
 * @module
 */

import { bodyInit } from "./_bytes.ts";
import { capture } from "./_capture.ts";
import { EMPTY } from "./_request.ts";
import type { OmittedReason, StoredResponse } from "./store.ts";

/** The header on a replay whose body was not recorded: its value is the reason. */
export const BODY_OMITTED_HEADER = "Idempotent-Body-Omitted";
const OMITTED_NAME = BODY_OMITTED_HEADER.toLowerCase();

/** Statuses whose responses have no body, live or replayed. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
/** Headers not kept in a record: the runtime frames the replay itself. */
const UNSTORED = new Set([
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
]);

/**
 * A response's headers as a record keeps them: ordered pairs, without the
 * framing headers, the `unstoredHeaders`, and any value `Deno.serve` could
 * not send again (a control character). `partial` says whether anything
 * but framing was left out, so that the live response keeps it.
 *
 * @param headers The handler's response headers.
 * @param unstored The `unstoredHeaders` option, lower case.
 * @returns The pairs to store, whether any but framing was left out, and
 * whether the headers hold a `Content-Type` (stored or not).
 */
export function storedHeaders(
  headers: Headers,
  unstored: ReadonlySet<string>,
): { pairs: [string, string][]; partial: boolean; typed: boolean } {
  const pairs: [string, string][] = [];
  let partial = false;
  let typed = false;
  for (const pair of headers) {
    const name = pair[0];
    if (UNSTORED.has(name)) continue;
    if (name === "content-type") typed = true;
    if (unstored.has(name) || CONTROL.test(pair[1])) partial = true;
    else pairs.push(pair);
  }
  return { pairs, partial, typed };
}

/**
 * A control character other than tab: `Headers` lets them through, but
 * `Deno.serve` (2.9) aborts the process when it writes one, and a record
 * holding one reads as damaged.
 */
// deno-lint-ignore no-control-regex -- matching control characters is the point
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;

/**
 * Builds the replay of a record: same status, headers in order (less the
 * `unstoredHeaders`, whatever the record holds), same bytes.
 *
 * @param record The completed record.
 * @param replayHeader The replay marker's name, lower case.
 * @param unstored The `unstoredHeaders` option, lower case.
 * @returns The replay.
 */
export function replay(
  record: StoredResponse,
  replayHeader: string,
  unstored: ReadonlySet<string>,
): Response {
  const omitted = record.body === null;
  const headers: [string, string][] = [];
  let typed = false;
  for (const pair of record.headers) {
    const name = pair[0];
    if (name === replayHeader || name === OMITTED_NAME) continue;
    if (omitted && name === "content-encoding") continue;
    if (unstored.has(name)) continue;
    if (name === "content-type") typed = true;
    headers.push(pair);
  }
  headers.push([replayHeader, "true"]);
  if (omitted) headers.push([OMITTED_NAME, record.omitted ?? "too_large"]);
  const body = omitted || NULL_BODY.has(record.status)
    ? null
    : bodyInit(record.body as Uint8Array<ArrayBuffer>, typed);
  return new Response(body, { status: record.status, headers });
}

/**
 * A cacheable response's body as its record keeps it: all of it (`within`),
 * or none, with why and the live body the client gets instead.
 */
export type RecordedBody =
  | { outcome: "within"; bytes: Uint8Array<ArrayBuffer> }
  | {
    outcome: "overflow" | "unfinished" | "failed";
    /** Why the record keeps no body. */
    omitted: OmittedReason;
    /** The live body: the handler's bytes, or its stream's error after them. */
    live: ReadableStream<Uint8Array<ArrayBuffer>>;
    /** The stream's error, when `failed`. */
    error?: unknown;
  };

/**
 * Captures a response body up to `cap`. When it does not get all of it, the
 * record keeps no body, and the client gets the prefix, then the rest (too
 * large, too slow), or the prefix, then the same error (failed; an abort
 * counts as cancelled). A body `capture()` cannot read (a locked stream)
 * counts as a stream error.
 *
 * @param body The response body.
 * @param cap The most bytes a record keeps.
 * @param stop Settles when the body has taken too long.
 * @returns The body as the record keeps it.
 */
export async function recordedBody(
  body: ReadableStream<Uint8Array>,
  cap: number,
  stop: Promise<unknown>,
): Promise<RecordedBody> {
  const captured = await capture(body, cap, stop).catch((error) => ({
    outcome: "failed" as const,
    prefix: EMPTY,
    error,
  }));
  switch (captured.outcome) {
    case "within":
      return captured;
    case "overflow":
      return {
        outcome: "overflow",
        omitted: "too_large",
        live: concat(captured.prefix, captured.rest),
      };
    case "unfinished":
      return {
        outcome: "unfinished",
        omitted: "too_slow",
        live: concat(captured.prefix, captured.rest),
      };
    case "failed":
      return {
        outcome: "failed",
        omitted: isAbort(captured.error) ? "cancelled" : "stream_error",
        live: failAfter(captured.prefix, captured.error),
        error: captured.error,
      };
  }
}

/** The live body of an overflow: the prefix, then the rest, cancellation passed on. */
function concat(
  prefix: Uint8Array<ArrayBuffer>,
  rest: ReadableStream<Uint8Array<ArrayBuffer>>,
): ReadableStream<Uint8Array<ArrayBuffer>> {
  let reader: ReadableStreamDefaultReader<Uint8Array<ArrayBuffer>> | undefined;
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    start(controller) {
      if (prefix.byteLength > 0) controller.enqueue(prefix);
    },
    async pull(controller) {
      reader ??= rest.getReader();
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader ? reader.cancel(reason) : rest.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/** The live body of a failed capture: the bytes read, then the same error. */
function failAfter(
  prefix: Uint8Array<ArrayBuffer>,
  error: unknown,
): ReadableStream<Uint8Array<ArrayBuffer>> {
  let sent = false;
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    pull(controller) {
      if (!sent && prefix.byteLength > 0) {
        sent = true;
        controller.enqueue(prefix);
        return;
      }
      controller.error(error);
    },
  }, { highWaterMark: 0 });
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}
