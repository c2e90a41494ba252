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
const SHA256 = "src/_sha256.ts";
const INPUTS = "tests/fingerprint_inputs_test.ts";
const PROBLEM = "src/problem.ts";
const RENDERER = "tests/problem_renderer_status_test.ts";
const RESPONSE = "src/_response.ts";
const HEADER_BYTES = "tests/idempotency_header_bytes_test.ts";
const VALIDATE = "src/_validate.ts";
const CHECKS = "tests/option_checks_test.ts";
const MEMORY = "src/stores/memory.ts";
const KV_ENGINE = "src/stores/_kv_engine.ts";
const PG_SQL = "src/stores/_postgres_sql.ts";
const SQLITE_SQL = "src/stores/_sqlite_sql.ts";
const MYSQL_SQL = "src/stores/_mysql_sql.ts";
const REDIS_SCRIPTS = "src/stores/_redis_scripts.ts";
const FAILOVER_BOTH = "src/stores/_failover_both.ts";
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
  {
    id: "fingerprint-secret-whole-buffer",
    file: FINGERPRINT,
    text: "? new Uint8Array(secret)",
    replacement: "? new Uint8Array(secret.buffer as ArrayBuffer)",
    tests: [INPUTS],
    what: "a secret given as a view is taken with the rest of its buffer",
  },
  {
    id: "fingerprint-large-unkeyed",
    file: FINGERPRINT,
    text: "if (this.#key === undefined) {",
    replacement:
      "if (this.#key === undefined || bytes.byteLength >= SUBTLE_FROM_BYTES) {",
    tests: [INPUTS],
    what:
      "bodies from 8 KiB on are hashed plainly under a secret: a dump confirms guessed bodies",
  },
  {
    id: "fingerprint-switch-at-n-plus-1",
    file: FINGERPRINT,
    text:
      "if (body.byteLength < SUBTLE_FROM_BYTES) return this.#hex(head, body);",
    replacement:
      "if (body.byteLength <= SUBTLE_FROM_BYTES) return this.#hex(head, body);",
    tests: [INPUTS],
    what: "a body of exactly 8 KiB is hashed synchronously, not as documented",
  },
  {
    id: "sha256-scratch-too-small",
    file: SHA256,
    text:
      "if (text.byteLength < rest.length * 3) {\n    text = new Uint8Array(rest.length * 3);",
    replacement:
      "if (text.byteLength < rest.length * 2) {\n    text = new Uint8Array(rest.length * 2);",
    tests: [INPUTS],
    what:
      "a long scope of three-byte characters is cut short before hashing: scopes collide",
  },
  {
    id: "sha256-ascii-edge",
    file: SHA256,
    text: "if (code >= 0x80) break;",
    replacement: "if (code > 0x80) break;",
    tests: [INPUTS],
    what: "U+0080 is hashed as the byte 0x80, not its UTF-8",
  },
  // src/problem.ts: which of a renderer's statuses survive, with what text.
  {
    id: "renderer-400-restatused",
    file: PROBLEM,
    text: "const own = response.status >= 400 && response.status <= 599;",
    replacement: "const own = response.status > 400 && response.status <= 599;",
    tests: [RENDERER],
    what:
      "a renderer's own 400 (Stripe's reused key) becomes the problem's 422",
  },
  {
    id: "renderer-599-restatused",
    file: PROBLEM,
    text: "const own = response.status >= 400 && response.status <= 599;",
    replacement: "const own = response.status >= 400 && response.status < 599;",
    tests: [RENDERER],
    what: "a renderer's own 599 is replaced by the problem's status",
  },
  {
    id: "renderer-3xx-kept",
    file: PROBLEM,
    text: "const own = response.status >= 400 && response.status <= 599;",
    replacement:
      "const own = response.status >= 300 && response.status <= 599;",
    tests: [RENDERER],
    what:
      "a renderer's 304 or 399 goes out as is: the client takes a problem for a redirect or a cache hit",
  },
  {
    id: "renderer-complete-2xx-kept",
    file: PROBLEM,
    text: "if (!own || missing.length > 0) {",
    replacement: "if (missing.length > 0) {",
    tests: [RENDERER],
    what: "a renderer's 201 that has every header goes out as a success",
  },
  {
    id: "renderer-status-text-kept",
    file: PROBLEM,
    text: 'statusText: own ? response.statusText : "",',
    replacement: "statusText: response.statusText,",
    tests: [RENDERER],
    what: "a re-statused problem keeps the renderer's text: a 422 says Created",
  },
  {
    id: "renderer-status-text-dropped",
    file: PROBLEM,
    text: 'statusText: own ? response.statusText : "",',
    replacement: 'statusText: "",',
    tests: [RENDERER],
    what:
      "a renderer's own status loses its status text once a header is added",
  },
  // src/_response.ts: header bytes a store refuses are left out, named.
  {
    id: "header-control-del",
    file: RESPONSE,
    text: "const CONTROL = /[\\x00-\\x08\\x0a-\\x1f\\x7f]/;",
    replacement: "const CONTROL = /[\\x00-\\x08\\x0a-\\x1f]/;",
    tests: [HEADER_BYTES],
    what:
      "a header holding DEL is stored: the store refuses or cannot replay the record",
  },
  {
    id: "header-control-tab",
    file: RESPONSE,
    text: "const CONTROL = /[\\x00-\\x08\\x0a-\\x1f\\x7f]/;",
    replacement: "const CONTROL = /[\\x00-\\x1f\\x7f]/;",
    tests: [HEADER_BYTES],
    what: "a header holding a tab is left out of the replay",
  },
  {
    id: "header-control-name-checked",
    file: RESPONSE,
    text: "name === SEALED_HEADER || CONTROL.test(pair[1])",
    replacement: "name === SEALED_HEADER || CONTROL.test(name)",
    tests: [HEADER_BYTES],
    what:
      "the name is checked, not the value: a control character reaches the store",
  },
  {
    id: "header-control-unnamed",
    file: RESPONSE,
    text: 'if (name !== "date" && name !== LEFT_OUT) left.add(name);',
    replacement:
      'if (name !== "date" && name !== LEFT_OUT && !CONTROL.test(pair[1])) left.add(name);',
    tests: [HEADER_BYTES],
    what:
      "a header left out for its bytes is not named in idempotent-omitted-headers",
  },
  // src/_validate.ts and the logger check: the hint's reach, case, what is missing.
  {
    id: "hint-case-sensitive",
    file: VALIDATE,
    text: "const lower = name.toLowerCase();",
    replacement: "const lower = name;",
    tests: [CHECKS],
    what: "'TTL' gets the whole list, not 'did you mean ttl'",
  },
  {
    id: "hint-reach-floor",
    file: VALIDATE,
    text: "return bestDistance <= Math.max(2, Math.ceil(name.length * 0.4))",
    replacement:
      "return bestDistance <= Math.max(2, Math.floor(name.length * 0.4))",
    tests: [CHECKS],
    what: "a name 40 % of its length (rounded up) from an option gets no hint",
  },
  {
    id: "hint-reach-strict",
    file: VALIDATE,
    text: "return bestDistance <= Math.max(2, Math.ceil(name.length * 0.4))",
    replacement:
      "return bestDistance < Math.max(2, Math.ceil(name.length * 0.4))",
    tests: [CHECKS],
    what: "a name exactly at the hint's reach gets the whole list",
  },
  {
    id: "hint-reach-wide",
    file: VALIDATE,
    text: "return bestDistance <= Math.max(2, Math.ceil(name.length * 0.4))",
    replacement:
      "return bestDistance <= Math.max(2, Math.ceil(name.length * 0.5))",
    tests: [CHECKS],
    what:
      "a name half rewritten is hinted as a misspelling of an unrelated option",
  },
  {
    id: "logger-one-method-enough",
    file: LOG,
    text: "if (lacks.length > 0) {",
    replacement: "if (lacks.length > 1) {",
    tests: [CHECKS],
    what:
      "a logger with warn() alone is taken: the first error line throws inside a request",
  },
  {
    id: "logger-null-as-console",
    file: LOG,
    text: "const to = logger === undefined ? globalThis.console : logger;",
    replacement: "const to = logger ?? globalThis.console;",
    tests: [CHECKS],
    what: "logger: null logs to console what it meant to silence",
  },
  // Each store's stats() and forget() on a record past its TTL not yet
  // deleted (the conformance case "stats() counts no record past its TTL…").
  {
    id: "memory-forget-expired-deleted",
    file: MEMORY,
    text: 'return entry.deadline <= this.#clock() ? "absent" : "deleted";',
    replacement: 'return "deleted";',
    tests: ["tests/stores/memory_test.ts"],
    what:
      "forgetting a record that already expired says deleted: the operator thinks it held the key",
  },
  {
    id: "memory-stats-expired-counted",
    file: MEMORY,
    text: "if (entry.deadline <= now) continue;",
    replacement: "",
    tests: ["tests/stores/memory_test.ts"],
    what: "stats counts records past their TTL that no claim dropped yet",
  },
  {
    id: "kv-forget-expired-deleted",
    file: KV_ENGINE,
    text: 'found.kind === "record" && this.#clock() < found.record.deadline;',
    replacement: 'found.kind === "record";',
    tests: ["tests/stores/kv_test.ts"],
    what:
      "forgetting a KV record past its deadline (KV not yet expired it) says deleted",
  },
  {
    id: "kv-stats-expired-counted",
    file: KV_ENGINE,
    text: "else if (now >= record.deadline) continue;",
    replacement: "",
    tests: ["tests/stores/kv_test.ts"],
    what:
      "KV stats counts records past their deadline that KV has not expired yet",
  },
  {
    id: "postgres-forget-expired-deleted",
    file: PG_SQL,
    text:
      "forget: `DELETE FROM ${t} WHERE slot = $1 RETURNING ${live} AS live`,",
    replacement:
      "forget: `DELETE FROM ${t} WHERE slot = $1 RETURNING true AS live`,",
    tests: ["tests/stores/postgres_test.ts"],
    what: "forgetting a row past its TTL before sweep() says deleted",
  },
  {
    id: "postgres-stats-expired-counted",
    file: PG_SQL,
    text: "FROM ${t} WHERE ${live}`,\n    sweep: `WITH doomed AS (",
    replacement: "FROM ${t}`,\n    sweep: `WITH doomed AS (",
    tests: ["tests/stores/postgres_test.ts"],
    what:
      "PostgreSQL stats counts rows past their TTL until sweep() deletes them",
  },
  {
    id: "sqlite-forget-expired-deleted",
    file: SQLITE_SQL,
    text:
      "forget: `DELETE FROM ${t} WHERE slot = ?1 RETURNING ${live} AS live`,",
    replacement:
      "forget: `DELETE FROM ${t} WHERE slot = ?1 RETURNING 1 AS live`,",
    tests: ["tests/stores/sqlite_test.ts"],
    what: "forgetting a SQLite row past its TTL says deleted",
  },
  {
    id: "sqlite-stats-expired-counted",
    file: SQLITE_SQL,
    text:
      "FROM ${t} WHERE ${live}`,\n    sweep: `DELETE FROM ${t} WHERE rowid IN",
    replacement: "FROM ${t}`,\n    sweep: `DELETE FROM ${t} WHERE rowid IN",
    tests: ["tests/stores/sqlite_test.ts"],
    what: "SQLite stats counts rows past their TTL until sweep() deletes them",
  },
  {
    id: "mysql-forget-expired-deleted",
    file: MYSQL_SQL,
    text: "forget: `DELETE FROM ${t} WHERE slot = ? AND ${live}`,",
    replacement: "forget: `DELETE FROM ${t} WHERE slot = ?`,",
    tests: ["tests/stores/mysql_test.ts"],
    what: "forgetting a MySQL row past its TTL says deleted",
  },
  {
    id: "mysql-stats-expired-counted",
    file: MYSQL_SQL,
    text: "FROM ${t} WHERE ${live}`,\n    sweep: (batchSize) =>",
    replacement: "FROM ${t}`,\n    sweep: (batchSize) =>",
    tests: ["tests/stores/mysql_test.ts"],
    what: "MySQL stats counts rows past their TTL until sweep() deletes them",
  },
  // RedisStore's admin reads of values it did not write.
  {
    id: "redis-peek-other-type-absent",
    file: REDIS_SCRIPTS,
    text:
      "if type(v) == 'table' then return {${PEEK_REPLY.OTHER}, '', left, t[1], t[2]} end",
    replacement:
      "if type(v) == 'table' then return {${PEEK_REPLY.ABSENT}, '', left, t[1], t[2]} end",
    tests: ["tests/stores/redis_admin_test.ts"],
    what:
      "a hash or list under the prefix peeks absent, while every claim of it answers 500",
  },
  {
    id: "redis-stats-other-type-uncounted",
    file: REDIS_SCRIPTS,
    text:
      "elseif type(head) == 'table' or head ~= '' or redis.call('EXISTS', key) == 1 then",
    replacement: "elseif type(head) == 'string' and head ~= '' then",
    tests: ["tests/stores/redis_admin_test.ts"],
    what:
      "stats does not count keys of another type under the prefix as unreadable",
  },
  {
    id: "redis-peek-no-ttl-expiry",
    file: REDIS_SCRIPTS,
    text: "const expiresAt = left > 0 ? now + left : null;",
    replacement: "const expiresAt = left > 0 ? now + left : now;",
    tests: ["tests/stores/redis_admin_test.ts"],
    what:
      "a value without a TTL peeks as expiring now, while it stays for ever",
  },
  // FailoverStore.peek() with one side down.
  {
    id: "failover-peek-primary-unsettled",
    file: FAILOVER_BOTH,
    text: "settle(() => peekPrimary(slot, options)),",
    replacement:
      "{ ok: true, value: await peekPrimary(slot, options) } as { ok: boolean; value: PeekResult; error?: unknown },",
    tests: ["tests/stores/failover_admin_outage_test.ts"],
    what:
      "inspecting a key during a primary outage fails, though the fallback holds the record",
  },
];
