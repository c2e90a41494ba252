// Copyright 2026 the @idempotent/http authors. MIT license.
/** A Stripe-shaped `renderProblem` that keeps the problem's status, shared by the renderer's tests. @module */

import type { ProblemToRender } from "../mod.ts";

/** `{"error":{type, code, message, doc_url}}`, with the problem's status and headers. */
export function stripeShaped(problem: ProblemToRender): Response {
  const type = problem.status === 409 || problem.status === 422
    ? "idempotency_error"
    : problem.status >= 500
    ? "api_error"
    : "invalid_request_error";
  const { code, detail: message, type: url } = problem;
  return Response.json(
    { error: { type, code, message, "doc_url": url } },
    problem.init,
  );
}
