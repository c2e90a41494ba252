// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's error answers, as RFC 9457 `application/problem+json`.
 *
 * @module
 */

/** Where the problem types are documented: the README's sections. */
const BASE = "https://jsr.io/@idempotent/http#";

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
}

/**
 * The stable `type` URI of each problem the middleware answers with. Each
 * points at the README section that explains it; match on these, not on the
 * `title` or `detail` text.
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
    /** 400: the key is required and the request has none. */
    missing: `${BASE}problem-key-missing`,
    /** 400: the key is not a valid key. */
    malformed: `${BASE}problem-key-malformed`,
    /** 409: a request with this key is still being processed. */
    inFlight: `${BASE}problem-key-in-flight`,
    /** 413: the request body is larger than the middleware buffers. */
    tooLarge: `${BASE}problem-request-too-large`,
    /** 400: the request body broke off before its end (cut off, bad framing). */
    incomplete: `${BASE}problem-request-incomplete`,
    /** 422: the key was used for a different request. */
    reused: `${BASE}problem-key-reused`,
    /** 503: the idempotency store cannot be reached. */
    unavailable: `${BASE}problem-store-unavailable`,
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
}

/**
 * Builds a problem response.
 *
 * @param problem The problem.
 * @param retryAfterSeconds A `Retry-After` value to add, in seconds.
 * @returns The response.
 */
export function problemResponse(
  problem: Problem,
  retryAfterSeconds?: number,
): Response {
  const headers: [string, string][] = [
    ["content-type", "application/problem+json"],
    ["cache-control", "no-store"],
  ];
  if (retryAfterSeconds !== undefined) {
    headers.push(["retry-after", String(retryAfterSeconds)]);
  }
  return new Response(JSON.stringify(problem), {
    status: problem.status,
    headers,
  });
}
