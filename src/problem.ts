// Copyright 2026 the @idempotent/http authors. MIT license.
/** The middleware's error answers: RFC 9457 problems, in one catalogue. @module */

/** The `type` URIs of the middleware's problems, by case. */
export interface ProblemTypes {
  /** 400: the key is required and the request has none. */
  readonly missing: string;
  /** 400: the key is not a valid key. */
  readonly malformed: string;
  /** 409: a request with this key is still being processed. */
  readonly inFlight: string;
  /** 413: the request body is larger than the middleware buffers. */
  readonly tooLarge: string;
  /** 400: the request body broke off before its end (cut off, bad framing). */
  readonly incomplete: string;
  /** 422: the key was used for a different request. */
  readonly reused: string;
  /** 503: the idempotency store cannot be reached. */
  readonly unavailable: string;
  /**
   * 500: the key's stored record cannot be read (damaged, foreign, or sealed
   * under a key not listed): the handler did not run, and a retry with this
   * key cannot succeed until an operator forgets the record.
   */
  readonly unreadable: string;
  /**
   * 500: an option's function (`ttl`, `lease`) threw or returned a value out
   * of range for this request: the handler did not run.
   */
  readonly misconfigured: string;
}

/**
 * The stable `type` URI of each problem, an anchor in the README: match on
 * these, not on `title` or `detail`.
 *
 * @example
 * ```ts
 * import { PROBLEM_TYPES } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * assert.equal(PROBLEM_TYPES.inFlight, "https://jsr.io/@idempotent/http#problem-key-in-flight");
 * ```
 */
export const PROBLEM_TYPES: ProblemTypes = Object.freeze(
  {
    missing: "https://jsr.io/@idempotent/http#problem-key-missing",
    malformed: "https://jsr.io/@idempotent/http#problem-key-malformed",
    inFlight: "https://jsr.io/@idempotent/http#problem-key-in-flight",
    tooLarge: "https://jsr.io/@idempotent/http#problem-request-too-large",
    incomplete: "https://jsr.io/@idempotent/http#problem-request-incomplete",
    reused: "https://jsr.io/@idempotent/http#problem-key-reused",
    unavailable: "https://jsr.io/@idempotent/http#problem-store-unavailable",
    unreadable: "https://jsr.io/@idempotent/http#problem-record-unreadable",
    misconfigured: "https://jsr.io/@idempotent/http#problem-misconfigured",
  },
);

/** The body of a problem response (RFC 9457). */
export interface Problem {
  /** A URI naming the kind of problem: one of {@linkcode PROBLEM_TYPES}. */
  type: string;
  /** A short summary of the kind of problem. */
  title: string;
  /** The HTTP status. */
  status: number;
  /** What went wrong with this request. */
  detail: string;
  /** The request's path. */
  instance: string;
  /** The stable machine code of the kind of problem (docs/problems.md). */
  code: ProblemCode;
  /** Whether the same request, with the same key, can be answered otherwise when sent again. */
  retryable: boolean;
}

/** The `code` of each problem, by case (docs/problems.md has the table). */
export type ProblemCode =
  | "idempotency_key_missing"
  | "idempotency_key_invalid"
  | "idempotency_in_flight"
  | "idempotency_request_too_large"
  | "idempotency_request_incomplete"
  | "idempotency_conflict"
  | "idempotency_unavailable"
  | "idempotency_record_unreadable"
  | "idempotency_misconfigured";

/** What each problem's `detail` (and `Retry-After`, in seconds) is made of. */
export interface ProblemDetails {
  missing: { header: string };
  malformed: { header: string; reason: string };
  inFlight: { retryAfter: number };
  tooLarge: { header: string; maxRequestBytes: number };
  incomplete: Record<never, never>;
  reused: Record<never, never>;
  unavailable: Record<never, never>;
  unreadable: Record<never, never>;
  misconfigured: Record<never, never>;
}

interface Entry<D> {
  status: number;
  code: ProblemCode;
  retryable: boolean;
  title: string;
  detail: (details: D) => string;
  retryAfter?: (details: D) => number;
}

/** Every problem, by its `PROBLEM_TYPES` name. */
const CATALOGUE = {
  missing: {
    status: 400,
    code: "idempotency_key_missing",
    retryable: false,
    title: "Idempotency key required",
    detail: ({ header }) => `This endpoint requires an ${header} header.`,
  },
  malformed: {
    status: 400,
    code: "idempotency_key_invalid",
    retryable: false,
    title: "Malformed idempotency key",
    detail: ({ header, reason }) =>
      `The ${header} header is malformed: ${reason}.`,
  },
  inFlight: {
    status: 409,
    code: "idempotency_in_flight",
    retryable: true,
    title: "Request in progress",
    detail: () =>
      "A request with this idempotency key is being processed. Retry it after it completes to get its response.",
    retryAfter: ({ retryAfter }) => retryAfter,
  },
  tooLarge: {
    status: 413,
    code: "idempotency_request_too_large",
    retryable: false,
    title: "Request body too large",
    detail: ({ header, maxRequestBytes }) =>
      `A request with an ${header} may have a body of at most ${maxRequestBytes} bytes.`,
  },
  incomplete: {
    status: 400,
    code: "idempotency_request_incomplete",
    retryable: true,
    title: "Request body incomplete",
    detail: () =>
      "The request body could not be read to its end (the upload was cut off, or its framing is invalid). The request was not processed: retry it with the same key.",
  },
  reused: {
    status: 422,
    code: "idempotency_conflict",
    retryable: false,
    title: "Idempotency key reused",
    detail: () =>
      "This idempotency key was used for a different request (another method, path, query or body). Use a new key for a new request.",
  },
  unavailable: {
    status: 503,
    code: "idempotency_unavailable",
    retryable: true,
    title: "Idempotency store unavailable",
    detail: () =>
      "The request was not processed: its idempotency key could not be checked. Retry it with the same key.",
    retryAfter: () => 1, // seconds
  },
  // docs/architecture.md, Unreadable is in flight: no Retry-After, none helps.
  unreadable: {
    status: 500,
    code: "idempotency_record_unreadable",
    retryable: false,
    title: "Idempotency record unreadable",
    detail: () =>
      "The stored record for this idempotency key cannot be read (damaged, written by another program, or sealed under an encryption key no longer listed), so the request was not processed. A retry with this key cannot succeed until an operator restores the key it was sealed under, or forgets the record.",
  },
  misconfigured: {
    status: 500,
    code: "idempotency_misconfigured",
    retryable: false,
    title: "Idempotency misconfigured",
    detail: () =>
      "The request was not processed: the server's idempotency options failed for it (its log says how).",
  },
} as const satisfies {
  [K in keyof ProblemDetails]: Entry<ProblemDetails[K]>;
};

/**
 * A problem as `renderProblem` gets it: the RFC 9457 fields, its
 * `Retry-After`, the request answered, and the answer's status and headers.
 */
export interface ProblemToRender extends Readonly<Problem> {
  /** Seconds to wait before a retry (`Retry-After`), on a 409 and a 503 only. */
  readonly retryAfter?: number;
  /** The request answered. */
  readonly request: Request;
  /**
   * The status and headers (`Cache-Control`, `Retry-After`) of the answer,
   * for `Response.json(body, problem.init)`; a fresh copy for each problem.
   */
  readonly init: { status: number; headers: Headers };
}

/** Renders a problem as the application's own error response. */
export type ProblemRenderer = (
  problem: ProblemToRender,
) => Response | Promise<Response>;

/** The answers that are problems, however rendered (for `src/hono.ts`). */
const PROBLEMS = new WeakSet<Response>();

/** Whether `response` is a problem the middleware answered. */
export function isProblem(response: Response): boolean {
  return PROBLEMS.has(response);
}

/** The HTTP status of one case of the catalogue. */
export function problemStatus<K extends keyof ProblemDetails>(
  kind: K,
): (typeof CATALOGUE)[K]["status"] {
  return CATALOGUE[kind].status;
}

/**
 * The problem response for one case of the catalogue, about `request`:
 * RFC 9457, or what `render` makes of it (docs/architecture.md, Problems).
 */
export function problemResponse<K extends keyof ProblemDetails>(
  request: Request,
  kind: K,
  details: ProblemDetails[K],
  render?: ProblemRenderer,
): Response | Promise<Response> {
  const entry = CATALOGUE[kind] as Entry<ProblemDetails[K]>;
  const { status, title, code, retryable } = entry;
  const problem: Problem = {
    type: PROBLEM_TYPES[kind],
    title,
    status,
    detail: entry.detail(details),
    instance: pathOf(request.url),
    code,
    retryable,
  };
  const headers: [string, string][] = [["cache-control", "no-store"]];
  const retryAfter = entry.retryAfter?.(details);
  if (retryAfter !== undefined) headers.push(["retry-after", `${retryAfter}`]);
  if (render === undefined) return standard(problem, headers);
  return rendered(render, { ...problem, request, retryAfter }, headers);
}

/** The RFC 9457 response. */
function standard(problem: Problem, headers: [string, string][]): Response {
  const response = new Response(JSON.stringify(problem), {
    status: problem.status,
    headers: [["content-type", "application/problem+json"], ...headers],
  });
  PROBLEMS.add(response);
  return response;
}

/**
 * The renderer's response, given the problem's status unless it has an error
 * status (4xx, 5xx) of its own, and the problem's headers it lacks; when it
 * throws or returns no `Response`, the RFC 9457 one.
 */
async function rendered(
  render: ProblemRenderer,
  { request, retryAfter, ...problem }: Problem & {
    request: Request;
    retryAfter: number | undefined;
  },
  headers: [string, string][],
): Promise<Response> {
  let response: unknown;
  try {
    const init = { status: problem.status, headers: new Headers(headers) };
    response = await render({
      ...problem,
      ...(retryAfter === undefined ? {} : { retryAfter }),
      request,
      init,
    });
  } catch {
    response = undefined;
  }
  if (!(response instanceof Response)) return standard(problem, headers);
  const own = response.status >= 400 && response.status <= 599;
  const missing = headers.filter(([name]) => !response.headers.has(name));
  let answer = response;
  if (!own || missing.length > 0) {
    const merged = new Headers(response.headers);
    for (const [name, value] of missing) merged.set(name, value);
    answer = new Response(response.body, {
      status: own ? response.status : problem.status,
      statusText: own ? response.statusText : "",
      headers: merged,
    });
  }
  PROBLEMS.add(answer);
  return answer;
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return "/";
  }
}
