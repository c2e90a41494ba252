// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The mutants `deno task mutate` applies, one at a time: small, realistic
 * bugs that the named test files must catch. The list only grows: a bug that
 * a test missed becomes a mutant here, beside the test that now catches it.
 *
 * `text` must occur exactly once in `file` (the runner reports a stale mutant
 * with its file and text when code moved); keep it short, but long enough to
 * be unique.
 *
 * @module
 */

/** One small bug and the tests that must catch it. */
export interface Mutant {
  /** A short unique name. */
  id: string;
  /** The file to mutate, from the repository root. */
  file: string;
  /** The exact text to replace: it must occur exactly once in `file`. */
  text: string;
  /** What replaces it. */
  replacement: string;
  /** The test files, from the repository root, that must fail. */
  tests: string[];
  /** What the bug breaks, in one line. */
  what: string;
}

const KV_SLOTS = "src/stores/_kv_slots.ts";
const MEMORY = "src/stores/memory.ts";
const REDIS_SCRIPTS = "src/stores/_redis_scripts.ts";
const REDIS_RECORD = "src/stores/_redis_record.ts";
const STORE_CALL = "src/stores/_store_call.ts";
const POSTGRES_SQL = "src/stores/_postgres_sql.ts";
const KV_CHUNKS = "src/stores/_kv_chunks.ts";
const FAILOVER = "src/stores/failover.ts";
const OPTIONS = "src/options.ts";
const GUARD = "src/_guard.ts";
const RESPONSE = "src/_response.ts";
const REQUEST = "src/_request.ts";

const T = {
  guardCapture: "tests/idempotency_capture_test.ts",
  protocol: "tests/idempotency_protocol_test.ts",
  guardLease: "tests/heartbeat_middleware_test.ts",
  property: "tests/idempotency_property_test.ts",
  edges: "tests/response_test.ts",
  lease: "tests/heartbeat_test.ts",
  memory: "tests/stores/memory_test.ts",
  kv: "tests/stores/kv_test.ts",
  redis: "tests/stores/redis_test.ts",
  postgres: "tests/stores/postgres_test.ts",
  failover: "tests/stores/failover_test.ts",
  capture: "tests/capture_test.ts",
  key: "tests/key_test.ts",
  e2e: "tests/stores/e2e_test.ts",
  completion: "tests/completion_test.ts",
  memoryBound: "tests/stores/memory_bound_test.ts",
  hostile: "tests/idempotency_hostile_input_test.ts",
  recordHeaders: "tests/record_test.ts",
  waitReplicas: "tests/stores/redis_wait_replicas_test.ts",
  client: "tests/client_test.ts",
  time: "tests/stores/store_call_test.ts",
  settle: "tests/heartbeat_settle_test.ts",
  options: "tests/idempotency_options_test.ts",
  credentials: "tests/idempotency_credentials_test.ts",
  sealing: "tests/idempotency_sealing_test.ts",
};

/** Every mutant, in the order they run. */
export const MUTANTS: Mutant[] = [
  // --- the five that survived the audit of issue 16 --------------------------
  {
    id: "kv-lease-boundary",
    file: KV_SLOTS,
    text: "if (live !== null && now < live.leaseUntil) {",
    replacement: "if (live !== null && now <= live.leaseUntil) {",
    tests: [T.kv],
    what: "a KV claim is still owned at the exact end of its lease",
  },
  {
    id: "omitted-keeps-content-encoding",
    file: RESPONSE,
    text: `if (omitted && name === "content-encoding") continue;`,
    replacement: "",
    tests: [T.edges, T.guardCapture],
    what: "a replay without its body still says Content-Encoding: gzip",
  },
  {
    id: "content-length-stored",
    file: RESPONSE,
    text: `const UNSTORED = new Set([\n  "content-length",\n`,
    replacement: "const UNSTORED = new Set([\n",
    tests: [T.edges, T.guardCapture],
    what: "a replay without its body keeps a stale Content-Length",
  },
  {
    id: "cookies-stored-by-default",
    file: OPTIONS,
    text: `unstoredHeaders: Object.freeze(["date", "set-cookie"])`,
    replacement: `unstoredHeaders: Object.freeze(["date"])`,
    tests: [T.credentials],
    what: "every session cookie sits in the store and goes to whoever replays",
  },
  {
    id: "omitted-headers-unnamed",
    file: RESPONSE,
    text: `if (left.size > 0) pairs.push([LEFT_OUT, [...left].join(", ")]);`,
    replacement: "",
    tests: [T.credentials],
    what: "a replay cannot tell a dropped cookie from none",
  },
  {
    id: "cache-control-private-stored",
    file: RESPONSE,
    text: "unstored.has(name) || named?.has(name) ||",
    replacement: "unstored.has(name) ||",
    tests: [T.credentials],
    what: 'the fields Cache-Control: private="…" names are stored and replayed',
  },
  {
    id: "lease-renewal-late",
    file: "src/_heartbeat.ts",
    text: "this.#leaseMs / 3;",
    replacement: "this.#leaseMs * 1.5;",
    tests: [T.lease, T.guardLease],
    what: "renewals come after the lease ran out: a retry could take over",
  },
  {
    id: "retry-after-floor",
    file: "src/_settle_estimate.ts",
    text: "Math.ceil(ms / 1000)",
    replacement: "Math.floor(ms / 1000)",
    tests: [T.edges, T.protocol],
    what: "Retry-After is a second short",
  },

  // --- fencing, all four stores ----------------------------------------------
  {
    id: "memory-fence-token",
    file: MEMORY,
    text: "entry.token !== token ||\n      entry.deadline <= now",
    replacement: "entry.deadline <= now",
    tests: [T.memory],
    what: "MemoryStore applies a write from any token",
  },
  {
    id: "memory-fence-expired",
    file: MEMORY,
    text: "entry.token !== token ||\n      entry.deadline <= now",
    replacement: "entry.token !== token",
    tests: [T.memory],
    what: "MemoryStore lets the owner of an expired record still write to it",
  },
  {
    id: "kv-fence-token",
    file: KV_SLOTS,
    text: `record.state !== "in_flight" || record.token !== token ||`,
    replacement: `record.state !== "in_flight" ||`,
    tests: [T.kv],
    what: "KvStore applies a write from any token",
  },
  {
    id: "redis-fence-token",
    file: REDIS_SCRIPTS,
    text:
      "if not c or string.sub(v, c + 1) ~= ARGV[1] then return ${REPLY.LOST} end",
    replacement: "if not c then return ${REPLY.LOST} end",
    tests: [T.redis],
    what: "RedisStore's scripts apply a write from any token",
  },
  {
    id: "redis-lease-floor",
    file: REDIS_SCRIPTS,
    text: "if left > floor then return {${REPLY.IN_FLIGHT},",
    replacement: "if left >= 0 then return {${REPLY.IN_FLIGHT},",
    tests: [T.redis],
    what:
      "RedisStore never lets a lease run out: a crashed owner's key waits for its TTL",
  },
  {
    id: "redis-record-omitted",
    file: REDIS_RECORD,
    text:
      `response.body === null ? response.omitted : response.body.byteLength`,
    replacement: `response.body === null ? 0 : response.body.byteLength`,
    tests: [T.redis],
    what:
      "RedisStore stores an omitted body as an empty one: a replay sends nothing instead of the 'omitted' answer",
  },
  {
    id: "redis-extend-floor",
    file: REDIS_SCRIPTS,
    text: "string.format('%d', left - tonumber(ARGV[2]))",
    replacement: "string.format('%d', left)",
    tests: [T.redis],
    what: "RedisStore's extend ends the lease instead of renewing it",
  },
  {
    id: "postgres-fence-state",
    file: POSTGRES_SQL,
    text: "AND state = 'in_flight' AND expires_at > ${NOW}`;",
    replacement: "AND expires_at > ${NOW}`;",
    tests: [T.postgres],
    what: "PostgresStore lets a completed row be completed or released again",
  },

  // --- capture ---------------------------------------------------------------
  {
    id: "capture-prefix-short",
    file: "src/_capture.ts",
    text: "const head = cap - seen;",
    replacement: "const head = cap - seen - 1;",
    tests: [T.capture],
    what: "the overflow prefix is a byte short and that byte is lost",
  },
  {
    id: "capture-drops-crossing-tail",
    file: "src/_capture.ts",
    text: "rest: restOf(current(), frame.subarray(head)),",
    replacement: "rest: restOf(current(), undefined),",
    tests: [T.capture],
    what: "the rest of the frame that crossed the cap is dropped",
  },
  {
    id: "capture-cancel-not-forwarded",
    file: "src/_capture.ts",
    text: "await reader.cancel(reason);",
    replacement: "",
    tests: [T.capture],
    what: "a client that leaves never cancels the handler's stream",
  },
  {
    id: "capture-lone-chunk-aliased",
    file: "src/_bytes.ts",
    text: "return new Uint8Array(only);",
    replacement: "return only as Uint8Array<ArrayBuffer>;",
    tests: [T.capture],
    what: "a lone frame's prefix is a view of it: the record holds its buffer",
  },
  {
    id: "capture-exact-cap-overflows",
    file: "src/_capture.ts",
    text: "if (seen + frame.byteLength > cap) {",
    replacement: "if (seen + frame.byteLength >= cap) {",
    tests: [T.capture],
    what: "a body of exactly the cap is recorded as too large",
  },

  // --- the key parser --------------------------------------------------------
  {
    id: "key-length-256",
    file: "src/key.ts",
    text: "export const MAX_KEY_LENGTH = 255;",
    replacement: "export const MAX_KEY_LENGTH = 256;",
    tests: [T.key],
    what: "a 256-character key is accepted",
  },
  {
    id: "key-backslash-escape",
    file: "src/key.ts",
    text: "if (next !== 0x22 && next !== 0x5c) {",
    replacement: "if (next !== 0x22) {",
    tests: [T.key],
    what: "an sf-string with an escaped backslash is refused",
  },
  {
    id: "key-space-inside-token",
    file: "src/key.ts",
    text: "if (c < 0x21 || c > 0x7e) {",
    replacement: "if (c < 0x20 || c > 0x7e) {",
    tests: [T.key],
    what: "a bare key with a space inside is accepted",
  },
  {
    id: "key-leading-space-kept",
    file: "src/key.ts",
    text: "while (start < end && isSpace(value.charCodeAt(start))) start++;",
    replacement: "",
    tests: [T.key],
    what: "a key with leading whitespace is a different key, or refused",
  },

  // --- the terminal rule -----------------------------------------------------
  {
    id: "terminal-null-body-released",
    file: GUARD,
    text: `    if (source === null) {
      const record = { status, headers, body: EMPTY };`,
    replacement: `    if (source === null) {
      await this.#completions.release(flight.beat!, "not_cacheable");
      return response;
      const record = { status, headers, body: EMPTY };`,
    tests: [T.guardCapture, T.protocol],
    what: "a 2xx without a body is released: a retry runs the handler again",
  },
  {
    id: "terminal-throwing-predicate-releases",
    file: GUARD,
    text: "counts as cacheable.\n      return true;",
    replacement: "counts as cacheable.\n      return false;",
    tests: [T.guardCapture, T.protocol, T.edges],
    what: "a cacheable() that throws releases the key after a 2xx",
  },

  // --- FailoverStore routing -------------------------------------------------
  {
    id: "failover-skips-fallback-lookup",
    file: FAILOVER,
    text:
      "second = await this.#fallback.claim(slot, options);\n      this.#fallbackAnswered = true;",
    replacement:
      `second = { state: "acquired", token: "-", recovered: false } as ClaimResult;\n      this.#fallbackAnswered = true;`,
    tests: [T.failover],
    what: "a record written to PostgreSQL during an outage is not honoured",
  },
  {
    id: "failover-copies-foreign-record",
    file: FAILOVER,
    text: "if (second.fingerprint === options.fingerprint) {",
    replacement: "if (second.fingerprint !== undefined) {",
    tests: [T.failover],
    what: "another request's record is copied into Redis under this claim",
  },
  {
    id: "failover-no-fallback-when-down",
    file: FAILOVER,
    text: "return await this.#claimFallback(slot, options, primaryError);",
    replacement: "throw primaryError;",
    tests: [T.failover],
    what: "Redis down means 503 instead of PostgreSQL",
  },

  // --- a defence against damaged values ---------------------------------------
  {
    id: "kv-chunk-count-unchecked",
    file: KV_CHUNKS,
    text: "if (r.chunks !== Math.ceil(total / CHUNK_BYTES)) return null;",
    replacement: "",
    tests: [T.kv],
    what: "a damaged chunk count makes a reader fetch chunks it never wrote",
  },

  // --- one per DESIGN.md section 2 rule ----------------------------------------
  {
    id: "rule1-terminal-overflow-released",
    file: GUARD,
    text: `this.#report(() => ({ type: "overflow", slot, cap }), started);`,
    replacement:
      `this.#report(() => ({ type: "overflow", slot, cap }), started);\n      await this.#completions.release(beat, "not_cacheable");\n      return new Response(captured.live, { status, statusText, headers: response.headers });`,
    tests: [T.guardCapture],
    what: "rule 1: an oversized 2xx is released and runs again on retry",
  },
  {
    id: "rule2-live-body-from-consumed-response",
    file: GUARD,
    text:
      "return new Response(bodyInit(body, typed), {\n        status,\n        statusText,\n        headers: partial ? response.headers : headers,\n      });",
    replacement: "return response;",
    tests: [T.guardCapture, T.protocol],
    what: "rule 2: the client gets the handler's already-read response",
  },
  {
    id: "rule3-kv-claim-unchecked",
    file: KV_SLOTS,
    text: ".check(entry)\n        .set(key, fresh,",
    replacement: ".set(key, fresh,",
    tests: [T.kv],
    what: "rule 3: a KV claim commits without checking what it read",
  },
  {
    id: "rule4-postgres-fence-any-token",
    file: POSTGRES_SQL,
    text: "slot = $1 AND token = $2 AND version",
    replacement: "slot = $1 AND (token = $2 OR token IS NOT NULL) AND version",
    tests: [T.postgres],
    what: "rule 4: PostgresStore applies a write from any token",
  },
  {
    id: "rule5-memory-ttl-boundary",
    file: MEMORY,
    text: "if (entry !== undefined && entry.deadline <= now) {",
    replacement: "if (entry !== undefined && entry.deadline < now) {",
    tests: [T.memory],
    what: "rule 5: a record still blocks at the exact end of its TTL",
  },
  {
    id: "rule6-unreadable-is-mismatch",
    file: GUARD,
    text:
      "if (claim.fingerprint !== null && claim.fingerprint !== fingerprint) {",
    replacement: "if (claim.fingerprint !== fingerprint) {",
    tests: [T.e2e],
    what: "rule 6: an unreadable value answers 422 instead of 409",
  },
  {
    id: "rule7-slot-ignores-scope",
    file: GUARD,
    text: `typeof scope === "string" ? scope : await scope,`,
    replacement: `"",`,
    tests: [T.protocol],
    what: "rule 7: two tenants that send the same key share a response",
  },
  {
    id: "rule7-global-scope-hashed-as-text",
    file: OPTIONS,
    text: `if (scope === "global") return undefined;`,
    replacement: `if (scope === "global") return () => "global";`,
    tests: [T.options],
    what: 'rule 7: scope "global" moves every slot of the empty scope',
  },
  {
    id: "rule8-unguarded-method-guarded",
    file: OPTIONS,
    text:
      "unguarded.has(method) ||\n    (!methods.has(method) && !methods.has(method.toUpperCase()))",
    replacement: "false",
    tests: [T.protocol],
    what: "rule 8: a GET with a key is read, hashed and claimed",
  },
  {
    id: "rule9-streamed-body-unbounded",
    file: REQUEST,
    text: "if (total > max) {",
    replacement: "if (total > max * 2) {",
    tests: [T.protocol],
    what: "rule 9: a streamed request body may be buffered to twice the bound",
  },
  {
    id: "rule10-malformed-key-sanitized",
    file: GUARD,
    text: "const parsed = parseIdempotencyKey(value);",
    replacement: String
      .raw`const parsed = parseIdempotencyKey(value.replace(/[^\x21-\x7e]/g, ""));`,
    tests: [T.protocol],
    what: "rule 10: a malformed key is cleaned up and claimed, not a 400",
  },

  // --- bugs fixed in the fault-tolerance round (issue 9 and after) ----------
  {
    id: "completion-retry-once",
    file: "src/_completion.ts",
    text: "new Retry(failed + config.completionTimeout, Infinity)",
    replacement: "new Retry(failed + config.completionTimeout, 1)",
    tests: [T.completion],
    what: "a completion that failed once is not retried: a retry runs again",
  },
  {
    id: "redis-orphan-timeout-kept",
    file: STORE_CALL,
    text:
      "call.orphan = this.orphans.watch(undo.slot, undo.token, undo.leaseMs);",
    replacement: "",
    tests: [T.redis],
    what: "a Redis claim that timed out and lands later is never undone",
  },
  {
    id: "postgres-orphan-timeout-kept",
    file: STORE_CALL,
    text:
      "call.orphan = this.orphans.watch(undo.slot, undo.token, undo.leaseMs);",
    replacement: "",
    tests: [T.postgres],
    what: "a PostgreSQL claim that timed out and commits later is never undone",
  },
  {
    id: "memory-dropped-body-referenced",
    file: MEMORY,
    text: "this.#withBody.remove(done);\n    this.#bodiless.push(done);",
    replacement: "this.#bodiless.push(done);",
    tests: [T.memoryBound],
    what:
      "a record whose body was dropped under maxBytes stays in the heap of records with a body",
  },
  {
    id: "method-case-sensitive",
    file: OPTIONS,
    text: "&& !methods.has(method.toUpperCase()))",
    replacement: ")",
    tests: [T.hostile],
    what: "a request sent as `patch` bypasses the guard and runs twice",
  },
  {
    id: "record-headers-unchecked",
    file: "src/_record.ts",
    text: "headers.every((pair) => isHeaderPair(pair[0], pair[1]))",
    replacement: "true",
    tests: [T.recordHeaders],
    what: "a stored header that is not valid HTTP makes every replay a 500",
  },
  {
    id: "request-read-error-throws",
    file: REQUEST,
    text: 'reader.releaseLock();\n    return { outcome: "failed", error };',
    replacement: "throw error;",
    tests: [T.hostile],
    what: "a request body that breaks mid-read escapes as a 500",
  },
  {
    id: "slot-plain-utf8",
    file: "src/fingerprint.ts",
    text: "if (scope.isWellFormed() && key.isWellFormed()) {",
    replacement: "if (true) {",
    tests: [T.hostile],
    what: "scopes that differ only in lone surrogates share a slot",
  },
  {
    id: "secret-ignored",
    file: "src/fingerprint.ts",
    text: "  return new Hasher(key);",
    replacement: "  return PLAIN;",
    tests: ["tests/fingerprint_test.ts"],
    what: "with a secret, slots and fingerprints stay plain SHA-256",
  },
  {
    id: "secret-large-body-unkeyed",
    file: "src/fingerprint.ts",
    text: 'crypto.subtle.sign("HMAC", key, bytes)',
    replacement: 'crypto.subtle.digest("SHA-256", bytes)',
    tests: ["tests/fingerprint_test.ts"],
    what:
      "with a secret, a body of 8 KiB or more is fingerprinted by plain SHA-256",
  },
  {
    id: "hmac-long-key-edge",
    file: "src/_sha256.ts",
    text: "if (key.byteLength > 64) {",
    replacement: "if (key.byteLength >= 64) {",
    tests: ["tests/sha256_test.ts"],
    what: "a secret of exactly 64 bytes is hashed first: not RFC 2104's HMAC",
  },
  {
    id: "key-comma-accepted",
    file: "src/key.ts",
    text: "    if (c === 0x2c) return COMMA;\n    if (c < 0x21 || c > 0x7e) {",
    replacement: "    if (c < 0x21 || c > 0x7e) {",
    tests: [T.key],
    what:
      "a bare key with a comma is accepted: two header lines read as one key",
  },
  {
    id: "postgres-epipe-is-sqlstate",
    file: POSTGRES_SQL,
    text:
      `if (typeof severity === "string" && typeof code === "string") {\n    return severity !== "ERROR";`,
    replacement:
      `if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) {\n    return typeof severity === "string" && severity !== "ERROR";`,
    tests: [T.postgres],
    what: "a claim cut off by EPIPE is taken as refused and never undone",
  },
  {
    id: "failover-in-flight-final",
    file: FAILOVER,
    text: "return await this.#checkInFlight(slot, options, first);",
    replacement: "return first;",
    tests: [T.failover],
    what: "a late Redis claim hides the record PostgreSQL completed: 409s",
  },
  {
    id: "wait-replicas-claim-kept",
    file: "src/stores/redis.ts",
    text: "this.#orphans.undo(slot, token, leaseMs);\n        throw error;",
    replacement: "throw error;",
    tests: [T.waitReplicas],
    what: "a claim too few replicas acknowledged holds the slot a lease",
  },
  {
    id: "client-new-key-per-attempt",
    file: "src/client.ts",
    text: "const request = new Request(op.input, op.init);",
    replacement:
      "if (op.attempts > 0 && op.key !== null) {\n        op.headers.set(op.config.header, op.config.generateKey());\n      }\n      const request = new Request(op.input, op.init);",
    tests: [T.client],
    what: "the client sends a retry with a new key: the operation runs twice",
  },
  {
    id: "deadlines-rearm-late",
    file: STORE_CALL,
    text: "this.#timer = setTimeout(this.#fire, call.at - now);",
    replacement: "this.#timer = setTimeout(this.#fire, this.ms);",
    tests: [T.time],
    what: "a deadline after the first fires up to a whole timeout late",
  },
  {
    id: "completion-beat-kept",
    file: "src/_completion.ts",
    text:
      "this.#heartbeat.stop(beat);\n    reportCompleted(this.#report, beat, record, outcome);",
    replacement: "reportCompleted(this.#report, beat, record, outcome);",
    tests: [T.settle],
    what: "a completed request's claim is renewed for ever",
  },
  {
    id: "completion-retry-beat-kept",
    file: "src/_completion.ts",
    text: "(outcome) => {\n          this.#heartbeat.stop(beat);",
    replacement: "(outcome) => {",
    tests: [T.settle],
    what: "a claim whose completion was retried is renewed for ever",
  },
  {
    id: "release-beat-kept",
    file: "src/_completion.ts",
    text:
      `reason: "thrown" | "not_cacheable"): Promise<void> {\n    this.#heartbeat.stop(beat);`,
    replacement: `reason: "thrown" | "not_cacheable"): Promise<void> {`,
    tests: [T.settle],
    what: "a released claim is renewed for ever: the key answers 409 for ever",
  },
  {
    id: "forbidden-method-guarded",
    file: OPTIONS,
    text: "if (forbidden !== undefined) {",
    replacement: "if (false) {",
    tests: [T.options],
    what:
      "a guarded TRACE is claimed, then the rebuilt request throws: 500, key held",
  },
  {
    id: "deadlines-tail-kept",
    file: "src/_async.ts",
    text: "if (next === undefined) this.#tail = prev;",
    replacement: "if (next === undefined) void prev;",
    tests: [T.time],
    what:
      "an operation started after the newest one settled is never watched: a hung store call waits for ever",
  },
  {
    id: "heartbeat-stop-twice",
    file: "src/_async.ts",
    text: "if (prev === undefined && this.head !== entry) return false;",
    replacement: "",
    tests: [T.lease],
    what:
      "a claim stopped twice (lost, then settled) unlinks its neighbours: claims still running lose their renewals",
  },
  {
    id: "seal-slot-unbound",
    file: "src/_seal.ts",
    text: "const clear = [version, id, slot, status, omitted ?? null];",
    replacement: "const clear = [version, id, status, omitted ?? null];",
    tests: [T.sealing],
    what:
      "a sealed record copied to another slot opens there: one caller's response replays to another's key",
  },
  {
    id: "seal-read-without-keys",
    file: GUARD,
    text: "? isSealed(claim.response) ? null : claim.response",
    replacement: "? claim.response",
    tests: [T.sealing],
    what:
      "a sealed record read with encryption off replays its ciphertext as the body",
  },
  {
    id: "seal-completion-in-clear",
    file: "src/_completion.ts",
    text: "store.complete(slot, token, await encryption.seal(slot, record))",
    replacement: "store.complete(slot, token, record)",
    tests: [T.sealing],
    what: "under encryption, a completion writes the record in clear",
  },
];
