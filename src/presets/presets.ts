// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Presets: the options that make the middleware's answers the ones a client
 * already understands, spread into {@linkcode idempotency}'s options.
 *
 * - {@linkcode stripeProblems}: Stripe's `{"error":{…}}` shape and statuses,
 *   which the `stripe` SDK raises as its own errors and retries as it
 *   retries Stripe's.
 * - {@linkcode acpProblems}: the Agentic Commerce Protocol's checkout rules
 *   (its `rfc.agentic_checkout.md`, §6): flat errors with its codes, a key on
 *   every request, keys per caller and endpoint, 4xx replayed and 5xx not,
 *   keys kept 24 hours at least.
 *
 * The table of codes and statuses is docs/problems.md.
 *
 * @example A reused Stripe key is a 400 `idempotency_error`
 * ```ts
 * import { idempotency } from "@idempotent/http";
 * import { stripeProblems } from "@idempotent/http/presets";
 * import assert from "node:assert/strict";
 *
 * const handler = idempotency(() => Response.json({ id: "ch_1" }), {
 *   scope: "global",
 *   ...stripeProblems(),
 * });
 * const charge = (amount: number) =>
 *   handler(new Request("http://api.test/v1/charges", {
 *     method: "POST",
 *     headers: { "idempotency-key": "k1" },
 *     body: `amount=${amount}`,
 *   }));
 * await (await charge(100)).text();
 * const reused = await charge(200);
 * assert.equal(reused.status, 400);
 * assert.equal((await reused.json()).error.type, "idempotency_error");
 * ```
 *
 * @module
 */

import type { ProblemRenderer, ProblemToRender } from "../problem.ts";
import { positiveMs } from "../_validate.ts";

/** What {@linkcode stripeProblems} sets. */
export interface StripePreset {
  /** Renders each problem as Stripe's API answers its errors. */
  renderProblem: ProblemRenderer;
}

/**
 * Problems as Stripe answers them: `{"error":{type, code, message,
 * doc_url}}`, `doc_url` the problem's `type` URI. A key reused for another
 * request is a 400 `idempotency_error` (the SDK's `StripeIdempotencyError`);
 * one in flight a 409 `idempotency_error`, code `idempotency_key_in_use`,
 * which the SDK retries; a bad key or body an `invalid_request_error`; an
 * unreachable store or unreadable record an `api_error`. Every answer says
 * `Stripe-Should-Retry` as the problem's `retryable` does, so the SDK never
 * retries an unreadable record's 500 and always retries a 503.
 *
 * @returns The options to spread into {@linkcode idempotency}'s.
 *
 * @example The SDK's in-flight code
 * ```ts
 * import { stripeProblems } from "@idempotent/http/presets";
 * import { PROBLEM_TYPES } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * const { renderProblem } = stripeProblems();
 * const request = new Request("http://api.test/v1/charges");
 * const init = { status: 409, headers: new Headers({ "retry-after": "1" }) };
 * const response = await renderProblem({
 *   type: PROBLEM_TYPES.inFlight, title: "Request in progress", status: 409,
 *   detail: "…", instance: "/v1/charges", code: "idempotency_in_flight",
 *   retryable: true, retryAfter: 1, request, init,
 * });
 * assert.equal(response.headers.get("stripe-should-retry"), "true");
 * assert.equal((await response.json()).error.code, "idempotency_key_in_use");
 * ```
 */
export function stripeProblems(): StripePreset {
  return { renderProblem: stripeRenderer };
}

const stripeRenderer: ProblemRenderer = (problem) => {
  const { code, status, init } = problem;
  const type = code === "idempotency_conflict" || status === 409
    ? "idempotency_error"
    : status >= 500
    ? "api_error"
    : "invalid_request_error";
  const error = {
    type,
    code: status === 409 ? "idempotency_key_in_use" : code,
    message: problem.detail,
    "doc_url": problem.type,
  };
  init.headers.set("stripe-should-retry", `${problem.retryable}`);
  const reused = code === "idempotency_conflict";
  return Response.json({ error }, { ...init, status: reused ? 400 : status });
};

/** The options of {@linkcode acpProblems}. */
export interface AcpOptions {
  /**
   * The caller's stable id (the `scope` option's function): keys are scoped
   * to it and to the request's path (ACP §6.1), so one key on two endpoints
   * is two keys. `"global"`: by path alone.
   */
  scope: ((request: Request) => string | Promise<string>) | "global";
  /**
   * How long a key is kept, in milliseconds: 24 hours at least (§6.6), else
   * a `RangeError`.
   * @default {86_400_000} (24 hours)
   */
  ttl?: number;
}

/** What {@linkcode acpProblems} sets. */
export interface AcpPreset {
  /** The caller's scope and the request's path, as one scope. */
  scope: (request: Request) => Promise<string>;
  /** `true`: a guarded request without a key is a 400. */
  required: boolean;
  /** The key's lifetime, in milliseconds. */
  ttl: number;
  /** Every response below 500. */
  cacheable: (response: Response) => boolean;
  /** ACP's flat errors. */
  renderProblem: ProblemRenderer;
}

/** ACP's shortest key retention (§6.6): 24 hours, in milliseconds. */
export const ACP_MIN_TTL = 86_400_000;

/**
 * The Agentic Commerce Protocol's idempotency (`rfc.agentic_checkout.md`,
 * §6): a guarded request without a key is a 400 `idempotency_key_required`;
 * the key reused for another body a 422 `idempotency_conflict`; one in
 * flight a 409 `idempotency_in_flight` with `Retry-After`; each flat,
 * `{type, code, message}`, `type` `invalid_request` for a 4xx,
 * `processing_error` for a 500, `service_unavailable` for a 503; the other
 * problems keep their codes. Keys are scoped to the caller and the path;
 * responses below 500 are recorded and replayed (a 4xx too), a 5xx is not
 * (a retry runs again); keys are kept `ttl`, 24 hours at least. ACP compares
 * bodies as JSON values: give a JSON `fingerprint` beside it.
 *
 * @param options The caller's scope, and `ttl`.
 * @returns The options to spread into {@linkcode idempotency}'s.
 * @throws {RangeError} When `ttl` is below 24 hours.
 *
 * @example A 4xx is replayed, a 5xx is not
 * ```ts
 * import { idempotency } from "@idempotent/http";
 * import { acpProblems } from "@idempotent/http/presets";
 * import assert from "node:assert/strict";
 *
 * let runs = 0;
 * const handler = idempotency(
 *   () => new Response(null, { status: ++runs === 1 ? 503 : 400 }),
 *   acpProblems({ scope: "global" }),
 * );
 * const post = () => new Request("http://api.test/checkout_sessions", {
 *   method: "POST", headers: { "idempotency-key": "k1" }, body: "{}",
 * });
 * assert.equal((await handler(post())).status, 503); // not recorded
 * assert.equal((await handler(post())).status, 400); // recorded
 * assert.equal((await handler(post())).status, 400); // replayed
 * assert.equal(runs, 2);
 * ```
 */
export function acpProblems(options: AcpOptions): AcpPreset {
  const { scope, ttl = ACP_MIN_TTL } = options;
  if (positiveMs("ttl", ttl) < ACP_MIN_TTL) {
    throw new RangeError(
      `'ttl' must be at least ${ACP_MIN_TTL} milliseconds (24 hours, ACP §6.6): current value is ${ttl}`,
    );
  }
  if (scope !== "global" && typeof scope !== "function") {
    throw new TypeError(
      `'scope' must be a function or "global": current value is ${scope}`,
    );
  }
  return {
    scope: async (request) => {
      const id = scope === "global" ? "" : await scope(request);
      if (id === "" && scope !== "global") return id; // refused as it is
      return JSON.stringify([id, new URL(request.url).pathname]);
    },
    required: true,
    ttl,
    cacheable: (response) => response.status < 500,
    renderProblem: acpRenderer,
  };
}

const ACP_CODES: Partial<Record<string, string>> = {
  "idempotency_key_missing": "idempotency_key_required",
};

function acpRenderer(problem: ProblemToRender): Response {
  const { status } = problem;
  const type = status === 503
    ? "service_unavailable"
    : status >= 500
    ? "processing_error"
    : "invalid_request";
  const code = ACP_CODES[problem.code] ?? problem.code;
  return Response.json({ type, code, message: problem.detail }, problem.init);
}
