// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of what an operator reads, continued: the second half of issue 35's
 * list (tests/mutation/mutants.ts runs them all).

 * @module
 */

import type { Mutant } from "../_targets.ts";

const LOG = "src/_log.ts";
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

/** The second half of issue 35's mutants. */
export const MUTANTS: Mutant[] = [
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
