// Copyright 2026 the @idempotent/http authors. MIT license.
/** A response as a record keeps it, with the live body, and a record's replay. @module */

import { bodyInit, denoState, EMPTY } from "./_bytes.ts";
import { capture } from "./_capture.ts";
import { SEALED_HEADER } from "./_seal.ts";
import { isProblem } from "./problem.ts";
import type { OmittedReason, StoredResponse } from "./store.ts";

/** The header on a replay whose body was not recorded: its value is the reason. */
export const BODY_OMITTED_HEADER = "Idempotent-Body-Omitted";
const OMITTED_NAME = BODY_OMITTED_HEADER.toLowerCase();
/** The header on a replay whose record left headers out (`Date` aside): their names. */
export const HEADERS_OMITTED_HEADER = "Idempotent-Omitted-Headers";
const LEFT_OUT = HEADERS_OMITTED_HEADER.toLowerCase();

/**
 * The header of `advertiseLifetime`: the key's `ttl`, in whole seconds (provisional).
 * @example
 * ```ts
 * import { idempotency, LIFETIME_HEADER } from "@idempotent/http";
 * const options = { scope: "global", ttl: 900_000, advertiseLifetime: true } as const;
 * const handler = idempotency(() => new Response("ok"), options);
 * const res = await handler(new Request("http://api.test/", { method: "POST", headers: { "idempotency-key": "k1" } }));
 * if (res.headers.get(LIFETIME_HEADER) !== "900") throw new Error("not advertised");
 * ```
 */
export const LIFETIME_HEADER = "Idempotency-TTL";
const LIFETIME = LIFETIME_HEADER.toLowerCase();
const EXPOSE = "access-control-expose-headers";

/**
 * `response` with `name: value` set, or appended: on a copy when its headers
 * are immutable (a `fetch()` response's, `Response.redirect()`'s).
 */
export function withHeader(
  response: Response,
  name: string,
  value: string,
  append = false,
): Response {
  const put = (to: Response) =>
    append ? to.headers.append(name, value) : to.headers.set(name, value);
  try {
    put(response);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    put(copy);
    return copy;
  }
}

/**
 * `response` with the middleware's headers it carries (the replay's, the
 * lifetime, a problem's `Retry-After`) not yet in its
 * `Access-Control-Expose-Headers` (any case; `*` does not count, being a
 * name under credentials) added as a line of its own, when it answers a
 * request with an `Origin` or carries `Access-Control-Allow-Origin`
 * (docs/cors.md).
 */
export function exposed(
  request: Request,
  response: Response,
  replayHeader: string,
): Response {
  const { headers } = response;
  if (
    !request.headers.has("origin") &&
    !headers.has("access-control-allow-origin")
  ) return response;
  const listed = new Set(
    headers.get(EXPOSE)?.split(",").map((name) => name.trim().toLowerCase()),
  );
  const ours = [replayHeader, LIFETIME, OMITTED_NAME, LEFT_OUT];
  if (isProblem(response)) ours.push("retry-after");
  const names = ours.filter((name) => headers.has(name) && !listed.has(name));
  if (names.length === 0) return response;
  return withHeader(response, EXPOSE, names.join(", "), true);
}

/** Statuses whose responses have no body, live or replayed. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
/** Framing headers, never stored. */
const UNSTORED = new Set([
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
]);

/**
 * The pairs to store (docs/architecture.md, Store contract; no control
 * characters either), whether any but framing was left out, and whether typed.
 */
export function storedHeaders(
  headers: Headers,
  unstored: ReadonlySet<string>,
): { pairs: [string, string][]; partial: boolean; typed: boolean } {
  const pairs: [string, string][] = [];
  const named = privateFields(headers.get("cache-control"));
  const left = new Set<string>();
  let partial = false;
  let typed = false;
  for (const pair of headers) {
    const name = pair[0];
    if (UNSTORED.has(name)) continue;
    if (name === "content-type") typed = true;
    if (
      unstored.has(name) || named?.has(name) || name === LEFT_OUT ||
      name === SEALED_HEADER || CONTROL.test(pair[1])
    ) {
      partial = true;
      if (name !== "date" && name !== LEFT_OUT) left.add(name);
    } else pairs.push(pair);
  }
  if (left.size > 0) pairs.push([LEFT_OUT, [...left].join(", ")]);
  return { pairs, partial, typed };
}

/** `private="…"` and `no-cache="…"` (RFC 9111 §5.2.2.4, §5.2.2.7), token form too. */
const QUALIFIED =
  /(?:^|,)\s*(?:private|no-cache)\s*=\s*(?:"([^"]*)"|([^\s,;]+))/gi;

/** The fields a `Cache-Control` value names private, or `undefined`. */
function privateFields(value: string | null): Set<string> | undefined {
  if (value === null || !value.includes("=")) return undefined;
  let names: Set<string> | undefined;
  for (const match of value.matchAll(QUALIFIED)) {
    for (const name of (match[1] ?? match[2]!).split(",")) {
      (names ??= new Set()).add(name.trim().toLowerCase());
    }
  }
  return names;
}

/** A control but tab: `Deno.serve` (2.9) aborts the process writing one. */
// deno-lint-ignore no-control-regex -- matching control characters is the point
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;

/** A record's replay, less the unstored headers, naming what it and its record left out. */
export function replay(
  record: StoredResponse,
  replayHeader: string,
  unstored: ReadonlySet<string>,
): Response {
  const omitted = record.body === null;
  const headers: [string, string][] = [];
  const left = new Set<string>();
  let typed = false;
  for (const pair of record.headers) {
    const name = pair[0];
    if (name === replayHeader || name === OMITTED_NAME) continue;
    if (omitted && name === "content-encoding") continue;
    if (name === LEFT_OUT) {
      for (const each of pair[1].split(",")) left.add(each.trim());
    } else if (unstored.has(name)) {
      if (name !== "date") left.add(name);
    } else {
      if (name === "content-type") typed = true;
      headers.push(pair);
    }
  }
  if (left.size > 0) headers.push([LEFT_OUT, [...left].join(", ")]);
  headers.push([replayHeader, "true"]);
  if (omitted) headers.push([OMITTED_NAME, record.omitted ?? "too_large"]);
  const body = omitted || NULL_BODY.has(record.status)
    ? null
    : bodyInit(record.body as Uint8Array<ArrayBuffer>, typed);
  return new Response(body, { status: record.status, headers });
}

/** A body as its record keeps it: all (`within`), or none, and the live body. */
export type RecordedBody =
  | { outcome: "within"; bytes: Uint8Array<ArrayBuffer> }
  | {
    outcome: "overflow" | "unfinished" | "failed";
    omitted: OmittedReason;
    live: ReadableStream<Uint8Array<ArrayBuffer>>;
    error?: unknown;
  };

/**
 * The response's body as its record keeps it, or `null` when it has none: a
 * body the runtime holds in memory is read in one call, without a stream;
 * any other is captured up to `cap` until `stop()` settles.
 */
export async function responseBody(
  response: Response,
  cap: number,
  stop: () => Promise<unknown>,
): Promise<RecordedBody | null> {
  if (held(response)) {
    let bytes: Uint8Array;
    try {
      bytes = await response.bytes();
    } catch (error) {
      const live = failAfter(EMPTY, error);
      return { outcome: "failed", omitted: "stream_error", live, error };
    }
    const owned = bytes.buffer instanceof ArrayBuffer
      ? bytes as Uint8Array<ArrayBuffer>
      : bytes.slice();
    if (owned.byteLength <= cap) {
      return { outcome: "within", bytes: owned };
    }
    const live = new Response(owned).body!;
    return { outcome: "overflow", omitted: "too_large", live };
  }
  const source = response.body;
  if (source === null) return null;
  return await recordedBody(source, cap, stop());
}

/**
 * Whether Deno holds the body as the string or bytes given to `new Response`,
 * unread: no stream, nothing to wait for. Elsewhere, `false`. (Asking
 * `bodyUsed` first also makes Deno keep a lazy body in that state.)
 */
function held(response: Response): boolean {
  if (response.bodyUsed) return false;
  const state = denoState(response, "response") as {
    body?: { streamOrStatic?: unknown } | null;
  } | undefined;
  const body = state?.body?.streamOrStatic as { body?: unknown } | undefined;
  return typeof body === "object" && body !== null &&
    (typeof body.body === "string" || body.body instanceof Uint8Array);
}

/** Captures a body up to `cap`; a locked stream counts as a stream error. */
async function recordedBody(
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
    case "unfinished":
      return {
        outcome: captured.outcome,
        omitted: captured.outcome === "overflow" ? "too_large" : "too_slow",
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

/** The prefix, then the rest, cancellation passed on. */
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

/** The bytes read, then the same error. */
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
