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
    text: "value.every((pair) => isHeaderPair(pair[0], pair[1]))",
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
  // --- issue 25, src/stores/memory.ts: documented numbers and shared data ---
  {
    id: "memory-body-fits-under",
    file: MEMORY,
    text: "const fits = body !== null && done.bytes + size <= this.#maxBytes;",
    replacement:
      "const fits = body !== null && done.bytes + size < this.#maxBytes;",
    tests: [T.memory],
    what: "a body that fills maxBytes exactly is stored without its body",
  },
  {
    id: "memory-bytes-full-early",
    file: MEMORY,
    text: "while (this.#bytes + size > this.#maxBytes) {",
    replacement: "while (this.#bytes + size >= this.#maxBytes) {",
    tests: [T.memory],
    what:
      "an older body is dropped when the store would be exactly at maxBytes",
  },
  {
    id: "memory-entries-one-more",
    file: MEMORY,
    text: "if (this.#entries.size < this.#maxEntries) return;",
    replacement: "if (this.#entries.size <= this.#maxEntries) return;",
    tests: [T.memory],
    what: "the store holds maxEntries + 1 records",
  },
  {
    id: "memory-entries-one-less",
    file: MEMORY,
    text: "if (this.#entries.size < this.#maxEntries) return;",
    replacement: "if (this.#entries.size < this.#maxEntries - 1) return;",
    tests: [T.memory],
    what: "the store evicts a record to hold its maxEntries-th",
  },
  {
    id: "memory-counts-shared-buffer",
    file: MEMORY,
    text: "const size = body?.byteLength ?? 0;",
    replacement: "const size = body?.buffer.byteLength ?? 0;",
    tests: [T.memory],
    what:
      "a body that views a larger buffer counts the whole buffer against maxBytes",
  },
  {
    id: "memory-default-max-bytes",
    file: MEMORY,
    text: "maxBytes ?? 67_108_864",
    replacement: "maxBytes ?? 67_108_863",
    tests: [T.memory],
    what: "the default maxBytes is a byte short of 64 MiB",
  },
  {
    id: "memory-default-max-entries",
    file: MEMORY,
    text: "maxEntries ?? 100_000",
    replacement: "maxEntries ?? 100_001",
    tests: [T.memory],
    what: "the default maxEntries is 100,001",
  },
  {
    id: "memory-wide-from-u0080",
    file: MEMORY,
    text: "const WIDE = /[\\u0100-\\uffff]/;",
    replacement: "const WIDE = /[\\u0080-\\uffff]/;",
    tests: [T.memory],
    what: "a key with a Latin-1 character counts twice its characters past 64",
  },
  {
    id: "memory-wide-counted-once",
    file: MEMORY,
    text: "2 * key.length - KEY_CHARS",
    replacement: "key.length - KEY_CHARS",
    tests: [T.memory],
    what: "a key of two-byte characters counts one byte a character",
  },
  // --- issue 25, src/stores/failover.ts: a fallback trusted once it answered ---
  {
    id: "failover-served-fallback-untrusted",
    file: FAILOVER,
    text:
      "result = await this.#fallback.claim(slot, options);\n      this.#fallbackAnswered = true;",
    replacement: "result = await this.#fallback.claim(slot, options);",
    tests: [T.failover],
    what:
      "a fallback that served claims while the primary was down is still untrusted: its outage refuses every claim",
  },
  {
    id: "failover-both-claim-untrusted",
    file: FAILOVER,
    text:
      "second = await this.#fallback.claim(slot, options);\n      this.#fallbackAnswered = true;",
    replacement: "second = await this.#fallback.claim(slot, options);",
    tests: [T.failover],
    what:
      "a fallback that answered b: claims is still untrusted: its outage refuses every claim",
  },
  {
    id: "failover-strict-ignored",
    file: FAILOVER,
    text: "if (!answered || this.#strict) {",
    replacement: "if (!answered) {",
    tests: [T.failover],
    what:
      "strict grants a claim on the primary alone once the fallback answered",
  },
  {
    id: "failover-trusted-from-start",
    file: FAILOVER,
    text: "#fallbackAnswered = false;",
    replacement: "#fallbackAnswered = true;",
    tests: [T.failover],
    what:
      "a fallback that never answered is trusted: a missing table looks like an outage and claims go on",
  },
  {
    id: "failover-either-applied",
    file: FAILOVER,
    text: "    return f.value;\n  }",
    replacement: '    return p.value === "applied" ? p.value : f.value;\n  }',
    tests: [T.failover],
    what:
      "a b: write the fallback lost is applied because the primary applied it",
  },
  {
    id: "failover-fallback-failed-applied",
    file: FAILOVER,
    text: 'if (p.ok) return failed("fallback", f.error), p.value;',
    replacement: 'if (p.ok) return failed("fallback", f.error), "applied";',
    tests: [T.failover],
    what: "a b: write the primary lost is applied when the fallback throws",
  },
  {
    id: "failover-primary-failed-applied",
    file: FAILOVER,
    text: 'if (!p.ok) return failed("primary", p.error), f.value;',
    replacement: 'if (!p.ok) return failed("primary", p.error), "applied";',
    tests: [T.failover],
    what: "a b: write the fallback lost is applied when the primary throws",
  },
  // --- issue 25, src/stores/kv.ts and its private files: checks, budgets, attempts ---
  {
    id: "kv-unit-moved-is-check",
    file: KV_SLOTS,
    text: "entry.versionstamp === read",
    replacement: "entry.versionstamp !== null",
    tests: ["tests/stores/kv_transaction_test.ts"],
    what:
      "a record that moved under a unit with checks is reported as a failed check: a takeover throws, an extend fails the commit",
  },
  {
    id: "kv-unit-check-is-lost",
    file: KV_SLOTS,
    text:
      'throw new Error(\n          "A check of the handler\'s mutations failed: nothing was committed",\n        );',
    replacement: 'return "lost";',
    tests: ["tests/stores/kv_transaction_test.ts"],
    what:
      "a failed check of the handler's is reported lost (409) instead of unknown (503)",
  },
  {
    id: "kv-inline-budget-under",
    file: KV_CHUNKS,
    text: "if (inlineSize(owned, response) <= INLINE_BUDGET) {",
    replacement: "if (inlineSize(owned, response) < INLINE_BUDGET) {",
    tests: [T.kv],
    what: "a record exactly at the inline budget is chunked",
  },
  {
    id: "kv-chunk-bytes-short",
    file: KV_CHUNKS,
    text: "const CHUNK_BYTES = 65_536;",
    replacement: "const CHUNK_BYTES = 65_535;",
    tests: [T.kv],
    what: "chunks hold a byte less than 64 KiB",
  },
  {
    id: "kv-attempts-fewer",
    file: KV_SLOTS,
    text: "const MAX_ATTEMPTS = 16;",
    replacement: "const MAX_ATTEMPTS = 15;",
    tests: [T.kv],
    what: "a contended operation gives up after 15 attempts",
  },
  {
    id: "kv-attempts-more",
    file: KV_SLOTS,
    text: "const MAX_ATTEMPTS = 16;",
    replacement: "const MAX_ATTEMPTS = 17;",
    tests: [T.kv],
    what: "a contended operation tries 17 times",
  },
  {
    id: "kv-locked-fewer",
    file: "src/stores/_kv_bodies.ts",
    text: "const LOCKED_ATTEMPTS = 10;",
    replacement: "const LOCKED_ATTEMPTS = 9;",
    tests: [T.kv],
    what: "a locked database is tried 9 times",
  },
  {
    id: "kv-locked-more",
    file: "src/stores/_kv_bodies.ts",
    text: "const LOCKED_ATTEMPTS = 10;",
    replacement: "const LOCKED_ATTEMPTS = 11;",
    tests: [T.kv],
    what: "a locked database is tried 11 times",
  },
  {
    id: "kv-owner-at-ttl",
    file: KV_SLOTS,
    text: "now >= record.deadline\n  ) return null;",
    replacement: "now > record.deadline\n  ) return null;",
    tests: [T.kv],
    what: "an owner still writes at the exact end of its record's TTL",
  },
  {
    id: "kv-retry-after-lease-only",
    file: KV_SLOTS,
    text: "const until = Math.min(live.leaseUntil, live.deadline);",
    replacement: "const until = live.leaseUntil;",
    tests: [T.kv],
    what:
      "an in-flight answer's Retry-After runs to a lease that outlives the TTL",
  },
  {
    id: "kv-claim-live-at-ttl",
    file: KV_SLOTS,
    text: "const live = previous !== null && now < previous.deadline",
    replacement: "const live = previous !== null && now <= previous.deadline",
    tests: [T.kv],
    what: "a record blocks a claim at the exact end of its TTL",
  },
  {
    id: "kv-default-timeout",
    file: "src/stores/kv.ts",
    text: "const timeoutMs = options?.timeoutMs ?? 10_000;",
    replacement: "const timeoutMs = options?.timeoutMs ?? 9_999;",
    tests: ["tests/stores/kv_deadline_test.ts"],
    what: "a KV operation gets 9,999 ms by default, not 10,000",
  },
  {
    id: "kv-chunk-slack-short",
    file: KV_CHUNKS,
    text: "export const CHUNK_SLACK_MS = 60_000;",
    replacement: "export const CHUNK_SLACK_MS = 59_999;",
    tests: [T.kv],
    what: "chunks expire a millisecond less than a minute after their record",
  },
  {
    id: "kv-get-many-fewer",
    file: KV_CHUNKS,
    text: "export const GET_MANY = 10;",
    replacement: "export const GET_MANY = 9;",
    tests: [T.kv],
    what: "chunks are read 9 keys a call",
  },
  {
    id: "kv-read-window-wider",
    file: KV_CHUNKS,
    text: "export const READ_WINDOW = 8 * GET_MANY;",
    replacement: "export const READ_WINDOW = 9 * GET_MANY;",
    tests: [T.kv],
    what: "a reader has 9 getMany calls out at once, 90 chunks",
  },
  {
    id: "kv-watch-lease-end-waits",
    file: KV_SLOTS,
    text: "now >= record.leaseUntil || now >= record.deadline)",
    replacement: "now > record.leaseUntil || now >= record.deadline)",
    tests: [T.kv],
    what: "waitForChange() waits on a lease that ends exactly now",
  },
  {
    id: "kv-watch-ttl-end-waits",
    file: KV_SLOTS,
    text: "now >= record.leaseUntil || now >= record.deadline)",
    replacement: "now >= record.leaseUntil || now > record.deadline)",
    tests: [T.kv],
    what: "waitForChange() waits on a claim whose TTL ends exactly now",
  },
  // --- issue 25, src/stores/_store_call.ts and _orphans.ts: deadline and undo bounds ---
  {
    id: "store-call-deadline-late",
    file: STORE_CALL,
    text: "const at = this.clock.now() + this.ms;",
    replacement: "const at = this.clock.now() + this.ms + 1;",
    tests: [T.time],
    what: "a call gets a millisecond more than timeoutMs",
  },
  {
    id: "orphans-keeps-one-more",
    file: "src/stores/_orphans.ts",
    text: "while (this.size >= this.max) {",
    replacement: "while (this.size > this.max) {",
    tests: [T.time],
    what: "the undo queue holds max + 1 orphans",
  },
  {
    id: "orphans-drops-watched-first",
    file: "src/stores/_orphans.ts",
    text: "const from = this.#ready.size > 0 ? this.#ready : this.#watched;",
    replacement:
      "const from = this.#watched.size > 0 ? this.#watched : this.#ready;",
    tests: [T.time],
    what: "a full undo queue drops a claim still out before a ready one",
  },
  {
    id: "orphans-default-max",
    file: "src/stores/_orphans.ts",
    text: "readonly max = 10_000,",
    replacement: "readonly max = 9_999,",
    tests: [T.time],
    what: "the undo queue holds 9,999 orphans by default",
  },
  {
    id: "orphans-backoff-first",
    file: "src/stores/_orphans.ts",
    text: 'const RETRY = { first: 200, max: 5_000, jitter: "equal" } as const;',
    replacement:
      'const RETRY = { first: 100, max: 5_000, jitter: "equal" } as const;',
    tests: [T.time],
    what: "a failed undo pass is retried after 100 ms at most, not 200",
  },
  {
    id: "orphans-backoff-max",
    file: "src/stores/_orphans.ts",
    text: 'const RETRY = { first: 200, max: 5_000, jitter: "equal" } as const;',
    replacement:
      'const RETRY = { first: 200, max: 6_400, jitter: "equal" } as const;',
    tests: [T.time],
    what: "the undo retries grow past 5 s",
  },
  {
    id: "orphans-backoff-full-jitter",
    file: "src/stores/_orphans.ts",
    text: 'const RETRY = { first: 200, max: 5_000, jitter: "equal" } as const;',
    replacement:
      'const RETRY = { first: 200, max: 5_000, jitter: "full" } as const;',
    tests: [T.time],
    what: "an undo retry may come at once (full jitter)",
  },
  {
    id: "orphans-backoff-not-reset",
    file: "src/stores/_orphans.ts",
    text: "this.#attempt = 0;",
    replacement: "",
    tests: [T.time],
    what:
      "after a pass succeeds the next failure waits as long as the last one",
  },
  {
    id: "orphans-release-at-lease-end",
    file: "src/stores/_orphans.ts",
    text: "if (orphan.until > Date.now()) {",
    replacement: "if (orphan.until >= Date.now()) {",
    tests: [T.time],
    what: "an orphan's release is still sent at the exact end of its lease",
  },
  // --- issue 25, src/stores/postgres.ts: claim attempts, sweep batches, outcomes ---
  {
    id: "postgres-claim-attempts-fewer",
    file: "src/stores/postgres.ts",
    text: "const CLAIM_ATTEMPTS = 4;",
    replacement: "const CLAIM_ATTEMPTS = 3;",
    tests: [T.postgres],
    what: "a claim that finds no row gives up after 3 statements",
  },
  {
    id: "postgres-claim-attempts-more",
    file: "src/stores/postgres.ts",
    text: "const CLAIM_ATTEMPTS = 4;",
    replacement: "const CLAIM_ATTEMPTS = 5;",
    tests: [T.postgres],
    what: "a claim that finds no row runs 5 statements",
  },
  {
    id: "postgres-free-row-decoded",
    file: "src/stores/postgres.ts",
    text: "if (row === undefined || row.free === true) continue;",
    replacement: "if (row === undefined) continue;",
    tests: [T.postgres],
    what:
      "a free row read while another claim won is answered as is, not claimed again",
  },
  {
    id: "postgres-sweep-full-batch-last",
    file: "src/stores/postgres.ts",
    text: "if (count < batchSize) return total;",
    replacement: "if (count <= batchSize) return total;",
    tests: [T.postgres],
    what: "sweep stops after a full batch, leaving expired rows",
  },
  {
    id: "postgres-sweep-default-batch",
    file: "src/stores/postgres.ts",
    text: "options.batchSize ?? 1000",
    replacement: "options.batchSize ?? 999",
    tests: [T.postgres],
    what: "sweep's default batch is 999 rows",
  },
  {
    id: "postgres-write-outcomes-swapped",
    file: "src/stores/postgres.ts",
    text: 'return rows.count === 1 ? "applied" : "lost";',
    replacement: 'return rows.count === 1 ? "lost" : "applied";',
    tests: [T.postgres],
    what:
      "a fenced write that changed its row is reported lost, one that changed none applied",
  },
  {
    id: "postgres-default-timeout",
    file: "src/stores/_postgres_options.ts",
    text: "const timeoutMs = options.timeoutMs ?? 2000;",
    replacement: "const timeoutMs = options.timeoutMs ?? 2001;",
    tests: [T.postgres],
    what: "a PostgreSQL statement gets 2,001 ms by default, not 2,000",
  },
  {
    id: "postgres-table-bytes-boundary",
    file: "src/stores/_postgres_migration.ts",
    text: "if (bytes(table) > MAX_TABLE_BYTES) {",
    replacement: "if (bytes(table) >= MAX_TABLE_BYTES) {",
    tests: [T.postgres],
    what: "a table name of exactly 48 bytes is refused",
  },
  {
    id: "postgres-table-chars",
    file: "src/stores/_postgres_migration.ts",
    text: "if (bytes(table) > MAX_TABLE_BYTES) {",
    replacement: "if (table.length > MAX_TABLE_BYTES) {",
    tests: [T.postgres],
    what:
      "a table name is measured in characters: 49 bytes in 25 characters pass",
  },
  {
    id: "postgres-schema-bytes-boundary",
    file: "src/stores/_postgres_migration.ts",
    text: "schema !== null && bytes(schema) > MAX_SCHEMA_BYTES",
    replacement: "schema !== null && bytes(schema) >= MAX_SCHEMA_BYTES",
    tests: [T.postgres],
    what: "a schema name of exactly 63 bytes is refused",
  },
  {
    id: "postgres-schema-unbounded",
    file: "src/stores/_postgres_migration.ts",
    text: "const MAX_SCHEMA_BYTES = 63;",
    replacement: "const MAX_SCHEMA_BYTES = 64;",
    tests: [T.postgres],
    what: "a schema name of 64 bytes is taken (PostgreSQL would cut it)",
  },
];
