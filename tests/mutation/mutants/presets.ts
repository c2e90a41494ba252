// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of the presets (`src/presets/`) and of `openApiComponents()`
 * (`src/openapi/`): tests/mutation/mutants.ts runs them all.
 *
 * @module
 */

import type { Mutant } from "../_targets.ts";

const PRESETS = "src/presets/presets.ts";
const STRIPE = "tests/problem_renderer_stripe_test.ts";
const ACP = "tests/presets_acp_test.ts";
const OPENAPI = "src/openapi/openapi.ts";
const OPENAPI_TEST = "tests/openapi_test.ts";

/** The mutants of the presets and the OpenAPI components. */
export const MUTANTS: Mutant[] = [
  {
    id: "stripe-reused-keeps-422",
    file: PRESETS,
    text: "status: reused ? 400 : status",
    replacement: "status",
    tests: [STRIPE],
    what:
      "a reused key stays 422: the SDK raises a plain StripeAPIError, not StripeIdempotencyError",
  },
  {
    id: "stripe-should-retry-always",
    file: PRESETS,
    text: 'init.headers.set("stripe-should-retry", `${problem.retryable}`);',
    replacement: 'init.headers.set("stripe-should-retry", "true");',
    tests: [STRIPE],
    what:
      "the SDK is told to retry an unreadable record's 500 and a reused key",
  },
  {
    id: "stripe-in-flight-not-idempotency-error",
    file: PRESETS,
    text: 'code === "idempotency_conflict" || status === 409',
    replacement: 'code === "idempotency_conflict"',
    tests: [STRIPE],
    what:
      "a key in flight reads as an invalid request, not Stripe's idempotency_error",
  },
  {
    id: "stripe-in-flight-code",
    file: PRESETS,
    text: 'code: status === 409 ? "idempotency_key_in_use" : code,',
    replacement: "code,",
    tests: [STRIPE],
    what: "a key in flight lacks Stripe's own code, idempotency_key_in_use",
  },
  {
    id: "acp-cacheable-2xx-only",
    file: PRESETS,
    text: "cacheable: (response) => response.status < 500,",
    replacement: "cacheable: (response) => response.ok,",
    tests: [ACP],
    what: "a 4xx (requires_3ds) runs again on retry: ACP §6.5 replays it",
  },
  {
    id: "acp-cacheable-500",
    file: PRESETS,
    text: "cacheable: (response) => response.status < 500,",
    replacement: "cacheable: (response) => response.status <= 500,",
    tests: [ACP],
    what: "a 500 is replayed: ACP §6.5 says a 5xx is processed afresh",
  },
  {
    id: "acp-ttl-24h-refused",
    file: PRESETS,
    text: 'if (positiveMs("ttl", ttl) < ACP_MIN_TTL) {',
    replacement: 'if (positiveMs("ttl", ttl) <= ACP_MIN_TTL) {',
    tests: [ACP],
    what: "a ttl of exactly 24 hours, ACP's minimum, is refused",
  },
  {
    id: "acp-ttl-unchecked",
    file: PRESETS,
    text: 'if (positiveMs("ttl", ttl) < ACP_MIN_TTL) {',
    replacement: 'if (positiveMs("ttl", ttl) < 0) {',
    tests: [ACP],
    what: "a key kept less than 24 hours is accepted: ACP §6.6",
  },
  {
    id: "acp-scope-without-path",
    file: PRESETS,
    text: "JSON.stringify([id, new URL(request.url).pathname])",
    replacement: "JSON.stringify([id])",
    tests: [ACP],
    what:
      "one key on two endpoints is one key: the second endpoint answers 422 (ACP §6.1)",
  },
  {
    id: "acp-scope-concatenated",
    file: PRESETS,
    text: "JSON.stringify([id, new URL(request.url).pathname])",
    replacement: "id + new URL(request.url).pathname",
    tests: [ACP],
    what:
      "caller a/b on /c and caller a on /b/c share keys: one replays the other's",
  },
  {
    id: "acp-scope-without-caller",
    file: PRESETS,
    text: 'const id = scope === "global" ? "" : await scope(request);',
    replacement: 'const id = "";',
    tests: [ACP],
    what: "two callers' keys share one space: one caller replays another's",
  },
  {
    id: "acp-missing-code-ours",
    file: PRESETS,
    text: '"idempotency_key_missing": "idempotency_key_required",',
    replacement: "",
    tests: [ACP],
    what: "a missing key is not ACP's idempotency_key_required",
  },
  {
    id: "acp-key-optional",
    file: PRESETS,
    text: "    required: true,\n",
    replacement: "    required: false,\n",
    tests: [ACP],
    what: "a POST without a key runs unguarded: ACP §6.1 rejects it",
  },
  {
    id: "acp-503-processing-error",
    file: PRESETS,
    text: "const type = status === 503",
    replacement: "const type = status === 500",
    tests: [ACP],
    what:
      "an unreachable store reads processing_error, not service_unavailable",
  },
  {
    id: "openapi-missing-when-optional",
    file: OPENAPI,
    text: 'if (CASES[i] === "missing" && !required) continue;',
    replacement: "",
    tests: [OPENAPI_TEST],
    what: "the 400 documents a missing key that an optional key never answers",
  },
  {
    id: "openapi-retry-after-on-409-only",
    file: OPENAPI,
    text: 'status === "409" || status === "503"',
    replacement: 'status === "409"',
    tests: [OPENAPI_TEST],
    what: "the 503's Retry-After is not documented",
  },
  {
    id: "openapi-example-header-as-given",
    file: OPENAPI,
    text: "example(kind, header.toLowerCase(), maxRequestBytes)",
    replacement: "example(kind, header, maxRequestBytes)",
    tests: [OPENAPI_TEST],
    what: "the examples name the header otherwise than the middleware's bodies",
  },
  {
    id: "openapi-parameter-never-required",
    file: OPENAPI,
    text: "          required,\n",
    replacement: "          required: false,\n",
    tests: [OPENAPI_TEST],
    what: "a required key is documented as optional",
  },
  {
    id: "openapi-parameter-in-query",
    file: OPENAPI,
    text: 'in: "header",',
    replacement: 'in: "query",',
    tests: [OPENAPI_TEST],
    what: "the key is documented as a query parameter",
  },
  {
    id: "openapi-code-enum-first-only",
    file: OPENAPI,
    text: "enum: bodies.map((body) => body.code!)",
    replacement: "enum: [bodies[0]!.code!]",
    tests: [OPENAPI_TEST],
    what:
      "the schema allows one code: a validating client refuses every other problem",
  },
];
