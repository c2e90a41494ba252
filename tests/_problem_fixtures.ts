// Copyright 2026 the @idempotent/http authors. MIT license.
/** A Stripe-shaped `renderProblem`, shared by the renderer's tests. @module */

import { PROBLEM_TYPES, type ProblemToRender } from "../mod.ts";

/** Stripe's error `type` and `code` for each problem type. */
const STRIPE: Record<string, { type: string; code: string }> = {
  [PROBLEM_TYPES.missing]: {
    type: "invalid_request_error",
    code: "parameter_missing",
  },
  [PROBLEM_TYPES.malformed]: {
    type: "invalid_request_error",
    code: "parameter_invalid",
  },
  [PROBLEM_TYPES.tooLarge]: {
    type: "invalid_request_error",
    code: "request_too_large",
  },
  [PROBLEM_TYPES.incomplete]: {
    type: "invalid_request_error",
    code: "request_incomplete",
  },
  [PROBLEM_TYPES.reused]: {
    type: "idempotency_error",
    code: "idempotency_key_reused",
  },
  [PROBLEM_TYPES.inFlight]: {
    type: "idempotency_error",
    code: "idempotency_key_in_use",
  },
  [PROBLEM_TYPES.unavailable]: { type: "api_error", code: "store_unavailable" },
  [PROBLEM_TYPES.unreadable]: { type: "api_error", code: "record_unreadable" },
  [PROBLEM_TYPES.misconfigured]: { type: "api_error", code: "misconfigured" },
};

/** `{"error":{type, code, message, doc_url}}`, with the problem's status and headers. */
export function stripeShaped(problem: ProblemToRender): Response {
  return Response.json(stripeBody(problem), problem.init);
}

/** As Stripe itself answers: a reused key is a 400, which its SDK raises as an idempotency error. */
export function asStripe(problem: ProblemToRender): Response {
  if (problem.type !== PROBLEM_TYPES.reused) return stripeShaped(problem);
  return Response.json(stripeBody(problem), { ...problem.init, status: 400 });
}

function stripeBody(problem: ProblemToRender) {
  const { type, code } = STRIPE[problem.type]!;
  const message = problem.detail;
  return { error: { type, code, message, "doc_url": problem.type } };
}
