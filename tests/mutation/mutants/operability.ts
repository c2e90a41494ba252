// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of what an operator reads and what binds a record: each store's
 * `peek`/`forget`/`stats`, `/otel` per operation and outcome, the log's limit
 * and levels, the problem renderer's statuses, the seal's bound fields, the
 * hash inputs' encoding edges and the option checks (issue 35;
 * tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import type { Mutant } from "../_targets.ts";

const OTEL = "src/otel.ts";
const LOG = "src/_log.ts";
const OTEL_OPS = "tests/otel_operations_test.ts";
const SEAL = "src/_seal.ts";
const SEAL_BINDING = "tests/seal_binding_test.ts";
const FINGERPRINT = "src/fingerprint.ts";
const INPUTS = "tests/fingerprint_inputs_test.ts";
const LOG_LIMIT = "tests/logging_limit_test.ts";

/** The mutants of the operability tools and the bound inputs. */
export const MUTANTS: Mutant[] = [
  // src/otel.ts: each operation timed, each outcome and attribute apart.
  {
    id: "otel-lost-completion-given-up",
    file: OTEL,
    text: 'if (event.outcome === "unknown") write(givenUp, "complete");',
    replacement: 'if (event.outcome !== "applied") write(givenUp, "complete");',
    tests: [OTEL_OPS],
    what: "a fenced-out completion (lost) is counted as a write given up",
  },
  {
    id: "otel-lost-release-given-up",
    file: OTEL,
    text: 'if (event.outcome === "unknown") write(givenUp, "release");',
    replacement: 'if (event.outcome !== "applied") write(givenUp, "release");',
    tests: [OTEL_OPS],
    what: "a fenced-out release (lost) is counted as a write given up",
  },
  {
    id: "otel-extend-untimed",
    file: OTEL,
    text:
      'for (const operation of ["claim", "complete", "release", "extend"] as const)',
    replacement:
      'for (const operation of ["claim", "complete", "release"] as const)',
    tests: [OTEL_OPS],
    what: "the heartbeat's renewals are not timed",
  },
  {
    id: "otel-release-untimed",
    file: OTEL,
    text:
      'for (const operation of ["claim", "complete", "release", "extend"] as const)',
    replacement:
      'for (const operation of ["claim", "complete", "extend"] as const)',
    tests: [OTEL_OPS],
    what: "releases are not timed",
  },
  {
    id: "otel-error-type-string",
    file: OTEL,
    text: 'return error instanceof Error ? error.name : "_OTHER";',
    replacement: "return error instanceof Error ? error.name : String(error);",
    tests: [OTEL_OPS],
    what:
      "a rejection that is not an Error puts its text in error.type (unbounded cardinality)",
  },
  {
    id: "otel-error-type-sticks",
    file: OTEL,
    text: 'attributes = { ...attributes, "error.type": errorType(error) };',
    replacement:
      'attributes = Object.assign(base, { "error.type": errorType(error) });',
    tests: [OTEL_OPS],
    what:
      "after one throw, every later call of that operation is recorded with error.type",
  },
  {
    id: "otel-write-attribute-name",
    file: OTEL,
    text: 'metric.add(1, { "idempotency.store.operation": operation });',
    replacement: "metric.add(1, { operation });",
    tests: [OTEL_OPS],
    what:
      "retries and given-up writes carry `operation`, not the table's attribute",
  },
  {
    id: "otel-recovered-copied-true",
    file: OTEL,
    text: 'recoveries.add(1, { "idempotency.failover.copied": event.copied });',
    replacement: 'recoveries.add(1, { "idempotency.failover.copied": true });',
    tests: [OTEL_OPS],
    what: "a recovery that copied nothing is counted as copied",
  },
  {
    id: "otel-fallback-attributed",
    file: OTEL,
    text: 'if (event.type === "fallback") fallbacks.add(1);',
    replacement:
      'if (event.type === "fallback") fallbacks.add(1, { "idempotency.store.operation": event.operation });',
    tests: [OTEL_OPS],
    what: "fallbacks carry an attribute the table does not list",
  },
  {
    id: "otel-request-slot-attribute",
    file: OTEL,
    text: 'requests.add(1, { "idempotency.outcome": result });',
    replacement:
      'requests.add(1, { "idempotency.outcome": result, "idempotency.slot_prefix": slot?.slice(0, 8) ?? "" });',
    tests: [OTEL_OPS],
    what: "the request counter carries the slot's prefix: one series per key",
  },
  // src/_log.ts: the minute at n−1/n/n+1, and each kind's level.
  {
    id: "log-interval-strict",
    file: LOG,
    text:
      "if (window === undefined || (now >= window.until && window.count === 0)) {",
    replacement:
      "if (window === undefined || (now > window.until && window.count === 0)) {",
    tests: [LOG_LIMIT],
    what:
      "a line exactly a minute after the last is held back for another minute",
  },
  {
    id: "log-interval-early",
    file: LOG,
    text:
      "if (window === undefined || (now >= window.until && window.count === 0)) {",
    replacement:
      "if (window === undefined || (now >= window.until - 1 && window.count === 0)) {",
    tests: [LOG_LIMIT],
    what: "a line a millisecond short of the minute is written at once",
  },
  {
    id: "log-flush-late",
    file: LOG,
    text: "window.until - now,\n      );",
    replacement: "window.until - now + 1,\n      );",
    tests: [LOG_LIMIT],
    what: "the counted line comes a millisecond after its minute",
  },
  {
    id: "log-flush-keeps-minute",
    file: LOG,
    text: "window.until = clock.now() + LOG_INTERVAL_MS;\n  };",
    replacement: "window.until = clock.now();\n  };",
    tests: [LOG_LIMIT],
    what:
      "after a counted line the next line is written at once, not a minute later",
  },
  {
    id: "log-count-once-more",
    file: LOG,
    text:
      'const times = window.count === 1 ? "once more" : `${window.count} times`;',
    replacement:
      'const times = window.count <= 2 ? "once more" : `${window.count} times`;',
    tests: [LOG_LIMIT],
    what: "two lines held back are told as one",
  },
  {
    id: "log-flush-at-error",
    file: LOG,
    text:
      "writeAt(\n      logger,\n      level,\n      `${PREFIX} ${kind} happened",
    replacement:
      'writeAt(\n      logger,\n      "error",\n      `${PREFIX} ${kind} happened',
    tests: [LOG_LIMIT],
    what: "a counted line of a warning is written as an error",
  },
  {
    id: "log-lease-lost-error",
    file: LOG,
    text:
      '"fail_open lease_lost unreadable fallback fallback_unavailable write_failed"',
    replacement:
      '"fail_open unreadable fallback fallback_unavailable write_failed"',
    tests: [LOG_LIMIT],
    what: "a lost lease is logged as an error",
  },
  {
    id: "log-fallback-unavailable-error",
    file: LOG,
    text:
      '"fail_open lease_lost unreadable fallback fallback_unavailable write_failed"',
    replacement: '"fail_open lease_lost unreadable fallback write_failed"',
    tests: [LOG_LIMIT],
    what: "a fallback that failed is logged as an error",
  },
  {
    id: "log-write-failed-error",
    file: LOG,
    text:
      '"fail_open lease_lost unreadable fallback fallback_unavailable write_failed"',
    replacement:
      '"fail_open lease_lost unreadable fallback fallback_unavailable"',
    tests: [LOG_LIMIT],
    what: "a FailoverStore's failed write is logged as an error",
  },
  {
    id: "log-recovered-warn",
    file: LOG,
    text: '["recovered", "info"],',
    replacement: '["recovered", "warn"],',
    tests: [LOG_LIMIT],
    what: "a recovery is a warning where the logger has info",
  },
  {
    id: "log-render-error-warn",
    file: LOG,
    text:
      '"fail_open lease_lost unreadable fallback fallback_unavailable write_failed"',
    replacement:
      '"fail_open lease_lost unreadable render_error fallback fallback_unavailable write_failed"',
    tests: [LOG_LIMIT],
    what: "a renderer that failed is only a warning",
  },
  {
    id: "log-kinds-shared",
    file: LOG,
    text: 'const kind = text.slice(0, text.indexOf(":"));',
    replacement: "const kind = text.slice(0, 1);",
    tests: [LOG_LIMIT],
    what:
      "kinds of one initial share a minute: a store_error hides a second kind",
  },
  // src/_seal.ts: each bound field, changed alone in a real store.
  {
    id: "seal-status-unbound",
    file: SEAL,
    text: "JSON.stringify([version, id, slot, fingerprint, status, decided])",
    replacement: "JSON.stringify([version, id, slot, fingerprint, decided])",
    tests: [SEAL_BINDING],
    what: "a sealed 201 rewritten to 200 in the store replays as 200",
  },
  {
    id: "seal-key-id-unbound",
    file: SEAL,
    text: "JSON.stringify([version, id, slot, fingerprint, status, decided])",
    replacement:
      "JSON.stringify([version, slot, fingerprint, status, decided])",
    tests: [SEAL_BINDING],
    what: "a record relabelled with another id of the same key bytes opens",
  },
  {
    id: "seal-extra-header-ignored",
    file: SEAL,
    text:
      "if (more !== undefined) return { record: null, reason: altered(id), keyId };",
    replacement: "",
    tests: [SEAL_BINDING],
    what:
      "a header written beside the seal in the store goes unnoticed: the record opens",
  },
  {
    id: "seal-v2-status-unbound",
    file: SEAL,
    text: "return JSON.stringify([version, id, slot, fingerprint, status]);",
    replacement: "return JSON.stringify([version, id, slot, fingerprint]);",
    tests: [SEAL_BINDING],
    what: "records sealed by version 2 no longer open (their status was bound)",
  },
  // src/fingerprint.ts and src/_sha256.ts: the hash inputs at their edges.
  {
    id: "fingerprint-secret-shared",
    file: FINGERPRINT,
    text: "? new Uint8Array(secret)",
    replacement: "? (secret as Uint8Array<ArrayBuffer>)",
    tests: [INPUTS],
    what:
      "the app's secret buffer is kept: wiping it changes the fingerprints of large bodies",
  },
];
