// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of the idempotent fetch client (tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import { type Mutant, T } from "../_targets.ts";

/** The mutants of the idempotent fetch client. */
export const MUTANTS: Mutant[] = [
  {
    id: "client-new-key-per-attempt",
    file: "src/client/client.ts",
    text: "const request = new Request(op.input, op.init);",
    replacement:
      "if (op.attempts > 0 && op.key !== null) {\n        op.headers.set(op.config.header, op.config.generateKey());\n      }\n      const request = new Request(op.input, op.init);",
    tests: [...T.client],
    what: "the client sends a retry with a new key: the operation runs twice",
  },
  // --- issue 25: the client (src/client/: client.ts, _operation.ts, _options.ts)
  {
    id: "client-pre-aborted-sent",
    file: "src/client/client.ts",
    text:
      "    if (op.signal.aborted) throw op.stopped();\n    if (op.unbuffered)",
    replacement: "    if (op.unbuffered)",
    tests: [...T.client],
    what: "a call whose signal aborted before it started is still sent",
  },
  {
    id: "client-retry-after-at-max-refused",
    file: "src/client/client.ts",
    text: "retryAfter !== null && retryAfter > config.maxRetryAfter",
    replacement: "retryAfter !== null && retryAfter >= config.maxRetryAfter",
    tests: [...T.client],
    what: "a Retry-After of exactly maxRetryAfter stops the operation",
  },
  {
    id: "client-retry-after-second-over-honoured",
    file: "src/client/client.ts",
    text: "retryAfter !== null && retryAfter > config.maxRetryAfter",
    replacement:
      "retryAfter !== null && retryAfter > config.maxRetryAfter + 1000",
    tests: [...T.client],
    what: "a Retry-After a second over maxRetryAfter is waited out",
  },
  {
    id: "client-network-backoff-to-deadline",
    file: "src/client/client.ts",
    text:
      "const delay = jittered(config, attempt);\n  if (config.clock() + delay >= op.deadlineAt) {",
    replacement:
      "const delay = jittered(config, attempt);\n  if (config.clock() + delay > op.deadlineAt) {",
    tests: [...T.client],
    what: "after a network error, a retry starts exactly at the timeout",
  },
  {
    id: "client-network-deadline-unchecked",
    file: "src/client/client.ts",
    text:
      "const delay = jittered(config, attempt);\n  if (config.clock() + delay >= op.deadlineAt) {",
    replacement: "const delay = jittered(config, attempt);\n  if (false) {",
    tests: [...T.client],
    what: "after a network error, a backoff past the timeout is waited out",
  },
  {
    id: "client-status-backoff-to-deadline",
    file: "src/client/client.ts",
    text:
      "jittered(config, attempts));\n  if (config.clock() + delay >= op.deadlineAt) {",
    replacement:
      "jittered(config, attempts));\n  if (config.clock() + delay > op.deadlineAt) {",
    tests: [...T.client],
    what: "after a 503, a retry starts exactly at the timeout",
  },
  {
    id: "client-network-one-attempt-more",
    file: "src/client/client.ts",
    text: "if (attempt >= config.maxAttempts) {",
    replacement: "if (attempt > config.maxAttempts) {",
    tests: [...T.client],
    what: "a network error is retried past maxAttempts",
  },
  {
    id: "client-attempts-as-deadline",
    file: "src/client/client.ts",
    text: 'throw stop("attempts", `Gave up after ${attempt} attempts',
    replacement: 'throw stop("deadline", `Gave up after ${attempt} attempts',
    tests: [...T.client],
    what: "the last attempt's network error is reported as the timeout",
  },
  {
    id: "client-retry-after-as-deadline",
    file: "src/client/client.ts",
    text: 'return stop(\n      "retry_after",',
    replacement: 'return stop(\n      "deadline",',
    tests: [...T.client],
    what: "a Retry-After over maxRetryAfter is reported as the timeout",
  },
  {
    id: "client-unkeyed-error-as-attempts",
    file: "src/client/client.ts",
    text: 'throw stop(\n      "not_retryable",',
    replacement: 'throw stop(\n      "attempts",',
    tests: [...T.client],
    what: "a keyless POST's network error is reported as out of attempts",
  },
  {
    id: "client-caller-timeout-as-deadline",
    file: "src/client/_operation.ts",
    text: "return reason === this.#timeout",
    replacement:
      'return reason instanceof DOMException && reason.name === "TimeoutError"',
    tests: [...T.client],
    what:
      "the caller's own TimeoutError abort is reported as the client's timeout",
  },
  {
    id: "client-body-at-limit-refused",
    file: "src/client/_operation.ts",
    text: "if ((size += value.byteLength) > limit) {",
    replacement: "if ((size += value.byteLength) >= limit) {",
    tests: [...T.client],
    what: "a stream body of exactly maxBodyBytes is refused",
  },
  {
    id: "client-default-attempts-6",
    file: "src/client/_options.ts",
    text: "options.maxAttempts ?? 5",
    replacement: "options.maxAttempts ?? 6",
    tests: [...T.client],
    what: "the documented 5 attempts become 6",
  },
  {
    id: "client-default-base-delay-1000",
    file: "src/client/_options.ts",
    text: "options.baseDelay ?? 500",
    replacement: "options.baseDelay ?? 1000",
    tests: [...T.client],
    what: "the documented first backoff of 500 ms doubles",
  },
  {
    id: "client-default-max-delay-20000",
    file: "src/client/_options.ts",
    text: "options.maxDelay ?? 10_000",
    replacement: "options.maxDelay ?? 20_000",
    tests: [...T.client],
    what: "the documented 10 s backoff cap doubles",
  },
  {
    id: "client-default-max-retry-after-61",
    file: "src/client/_options.ts",
    text: "options.maxRetryAfter ?? 60_000",
    replacement: "options.maxRetryAfter ?? 61_000",
    tests: [...T.client],
    what: "the documented 60 s Retry-After ceiling becomes 61 s",
  },
  {
    id: "client-default-timeout-61",
    file: "src/client/_options.ts",
    text: "options.timeout ?? 60_000",
    replacement: "options.timeout ?? 61_000",
    tests: [...T.client],
    what: "the documented 60 s timeout becomes 61 s",
  },
  {
    id: "client-default-body-1mib-refused",
    file: "src/client/_options.ts",
    text: "options.maxBodyBytes ?? DEFAULTS.maxRequestBytes,",
    replacement: "options.maxBodyBytes ?? DEFAULTS.maxRequestBytes - 1,",
    tests: [...T.client],
    what: "a stream body of the documented 1 MiB is refused",
  },
  {
    id: "client-retry-after-date-short",
    file: "src/client/client.ts",
    text: "Math.max(0, date - now)",
    replacement: "Math.max(0, date - now - 1000)",
    tests: [...T.client],
    what:
      "a Retry-After date is read a second early: one past maxRetryAfter is waited out",
  },
  {
    id: "client-abort-in-attempt-retried",
    file: "src/client/client.ts",
    text: "  if (op.signal.aborted) throw op.stopped();\n  if (!retried) {",
    replacement: "  if (!retried) {",
    tests: [...T.client],
    what: "an attempt the caller aborted is reported to onRetry as a retry",
  },
  {
    id: "client-retry-after-over-backoff",
    file: "src/client/client.ts",
    text: "Math.max(retryAfter ?? 0, jittered(config, attempts))",
    replacement: "retryAfter ?? jittered(config, attempts)",
    tests: [...T.client],
    what: "a Retry-After: 0 cuts the backoff to nothing",
  },
  {
    id: "client-single-attempt-buffered",
    file: "src/client/_operation.ts",
    text: "config.maxAttempts > 1 && (form || stream)",
    replacement: "(form || stream)",
    tests: [...T.client],
    what:
      "a stream that is sent once is buffered and refused over maxBodyBytes",
  },
  {
    id: "client-key-whitespace-accepted",
    file: "src/client/_operation.ts",
    text: "if (parsed === null || !parsed.ok || parsed.key !== key) {",
    replacement: "if (parsed === null || !parsed.ok) {",
    tests: [...T.client],
    what:
      "an idempotencyKey with whitespace around is taken: the server reads another key",
  },
  {
    id: "client-timeout-zero-taken",
    file: "src/client/_options.ts",
    text: 'positiveMs("timeout"',
    replacement: 'nonNegativeMs("timeout"',
    tests: [...T.client],
    what: "a timeout of 0 is taken: every call ends before its first attempt",
  },
  {
    id: "client-base-delay-zero-refused",
    file: "src/client/_options.ts",
    text: 'nonNegativeMs("baseDelay"',
    replacement: 'positiveMs("baseDelay"',
    tests: [...T.client],
    what: "a baseDelay of 0 (retry at once) is refused",
  },
  {
    id: "client-retry-status-599-refused",
    file: "src/client/_options.ts",
    text: "s >= 500 && s <= 599",
    replacement: "s >= 500 && s < 599",
    tests: [...T.client],
    what: "599 cannot be made retryable",
  },
  {
    id: "client-retry-status-500-refused",
    file: "src/client/_options.ts",
    text: "s >= 500 && s <= 599",
    replacement: "s > 500 && s <= 599",
    tests: [...T.client],
    what: "500 cannot be made retryable",
  },
  {
    id: "client-method-case-kept",
    file: "src/client/_operation.ts",
    text: 'request?.method ?? "GET").toUpperCase();',
    replacement: 'request?.method ?? "GET");',
    tests: [...T.client],
    what: "a POST written `post` gets no key: it is sent once, never retried",
  },
  {
    id: "client-methods-option-case-kept",
    file: "src/client/_options.ts",
    text: "methods: new Set(methods.map((m) => m.toUpperCase())),",
    replacement: "methods: new Set(methods),",
    tests: [...T.client],
    what: 'methods: ["put"] keys no PUT',
  },
  {
    id: "client-sleep-error-swallowed",
    file: "src/client/_operation.ts",
    text: "if (!signal.aborted) throw error;",
    replacement: "",
    tests: [...T.client],
    what:
      "a sleep that fails is taken for a wait that ended: the retries go on",
  },
  {
    id: "client-caller-listener-kept",
    file: "src/client/_operation.ts",
    text: 'this.#caller?.removeEventListener("abort", this.#onAbort);',
    replacement: "",
    tests: [...T.client],
    what:
      "the caller's abort after the call ends still aborts the request: its body breaks",
  },
  {
    id: "client-retried-body-kept",
    file: "src/client/client.ts",
    text:
      "await response.body?.cancel().catch(() => {}); // frees the connection",
    replacement: "",
    tests: [...T.client],
    what: "a retried answer's body is never cancelled: its connection is held",
  },
  // --- issue 29, item 10: /client's default retryStatuses
  {
    id: "client-default-retries-500",
    file: "src/client/_options.ts",
    text: "options.retryStatuses ?? [502, 504]",
    replacement: "options.retryStatuses ?? [500, 502, 504]",
    tests: [T.clientDefaults],
    what:
      "the default client retries 500: a handler that charged then answered 500 charges twice",
  },
  {
    id: "client-default-drops-504",
    file: "src/client/_options.ts",
    text: "options.retryStatuses ?? [502, 504]",
    replacement: "options.retryStatuses ?? [502]",
    tests: [T.clientDefaults],
    what: "a gateway timeout (504) is no longer retried by default",
  },
];
