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
    text: 'crypto.subtle.sign("HMAC", await this.#imported, bytes)',
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
  // src/stores/redis.ts, _redis_scripts.ts, _redis_record.ts: the lease
  // floor, the TTL every write keeps, the hints, the omitted replay.
  {
    id: "redis-claim-floor-off-by-one",
    file: REDIS_RECORD,
    text: "return `${IN_FLIGHT}${ttlMs - leaseMs}:${token}`;",
    replacement: "return `${IN_FLIGHT}${ttlMs - leaseMs - 1}:${token}`;",
    tests: [T.redis],
    what: "a claim's lease runs 1 ms longer than leaseMs",
  },
  {
    id: "redis-in-flight-hint-ttl",
    file: REDIS_SCRIPTS,
    text: "math.min(left - floor, left)",
    replacement: "left",
    tests: [T.redis],
    what:
      "a claim in flight answers Retry-After with the key's TTL, not the lease left",
  },
  {
    id: "redis-extend-half-lease",
    file: REDIS_SCRIPTS,
    text: "left - tonumber(ARGV[2])",
    replacement: "left - tonumber(ARGV[2]) / 2",
    tests: [T.redis],
    what: "extend renews the lease for half of what it was asked",
  },
  {
    id: "redis-extend-drops-ttl",
    file: REDIS_SCRIPTS,
    text: ".. ':' .. ARGV[1], 'KEEPTTL')",
    replacement: ".. ':' .. ARGV[1])",
    tests: [T.redis],
    what: "extend makes the key persist: a crashed owner's slot is never freed",
  },
  {
    id: "redis-complete-drops-ttl",
    file: REDIS_SCRIPTS,
    text: "redis.call('SET', key, ARGV[2], 'KEEPTTL')",
    replacement: "redis.call('SET', key, ARGV[2])",
    tests: [T.redis],
    what: "a completed record never expires: ttlMs is ignored after complete",
  },
  {
    id: "redis-unreadable-hint-lease",
    file: REDIS_SCRIPTS,
    text: "then return {${REPLY.UNREADABLE}, left} end",
    replacement: "then return {${REPLY.UNREADABLE}, lease} end",
    tests: [T.redis],
    what:
      "an unreadable value that expires sooner than the lease hints the lease",
  },
  {
    id: "redis-unreadable-no-ttl",
    file: REDIS_SCRIPTS,
    text: "if left > 0 and left < lease then",
    replacement: "if left < lease then",
    tests: [T.redis],
    what: "an unreadable value without TTL hints -1 ms, answered as 1 ms",
  },
  {
    id: "redis-omitted-reason-fixed",
    file: REDIS_RECORD,
    text: "toStoredResponse(+status, headers, null, omitted)",
    replacement: 'toStoredResponse(+status, headers, null, "too_large")',
    tests: [T.redis],
    what: "an omitted body replays with the wrong reason",
  },
  {
    id: "redis-recovered-as-acquired",
    file: REDIS_SCRIPTS,
    text: "recovered: reply === REPLY.RECOVERED",
    replacement: "recovered: false",
    tests: [T.redis],
    what: "a claim that took over a lapsed lease is reported a fresh one",
  },
  {
    id: "redis-in-flight-hint-zero",
    file: REDIS_SCRIPTS,
    text: "Math.max(1, Number(b) || 1)",
    replacement: "Math.max(0, Number(b) || 1)",
    tests: [T.redis],
    what: "a claim in flight may hint a Retry-After below 1 ms",
  },
  {
    id: "redis-wait-one-short-accepted",
    file: "src/stores/redis.ts",
    text: "if (Number(count) < this.#replicas) {",
    replacement: "if (Number(count) < this.#replicas - 1) {",
    tests: [T.redis],
    what: "a claim one replica short of waitReplicas is kept",
  },
  {
    id: "redis-wait-exact-refused",
    file: "src/stores/redis.ts",
    text: "if (Number(count) < this.#replicas) {",
    replacement: "if (Number(count) <= this.#replicas) {",
    tests: [T.redis],
    what: "exactly waitReplicas acknowledgements are refused",
  },
  {
    id: "redis-wait-timeout-default",
    file: "src/stores/redis.ts",
    text: "options.waitTimeoutMs ?? 500",
    replacement: "options.waitTimeoutMs ?? 1000",
    tests: [T.redis],
    what: "WAIT blocks 1 s by default, not the documented 500 ms",
  },
  {
    id: "redis-wait-zero-replicas",
    file: "src/stores/redis.ts",
    text: `result.state === "acquired" && this.#replicas > 0`,
    replacement: `result.state === "acquired" && this.#replicas >= 0`,
    tests: [T.redis],
    what: "waitReplicas: 0 still sends a WAIT after every claim",
  },
  // src/_guard.ts: each problem's status and event, the replay's event.
  {
    id: "guard-too-large-reason-malformed",
    file: GUARD,
    text: `? "too_large"\n      : kind as "missing" | "malformed";`,
    replacement: `? "malformed"\n      : kind as "missing" | "malformed";`,
    tests: [T.protocol],
    what: "a 413 is reported as a malformed key",
  },
  {
    id: "guard-incomplete-status-413",
    file: GUARD,
    text: `type: "rejected", slot: null, status: 400, reason, error`,
    replacement:
      `type: "rejected", slot: null, status: 413 as 400, reason, error`,
    tests: [T.protocol],
    what: "a request body that broke off is reported as a 413",
  },
  {
    id: "guard-conflict-never-unreadable",
    file: GUARD,
    text: "const unreadable = fingerprint === null;",
    replacement: "const unreadable = false;",
    tests: [T.protocol],
    what:
      "a 409 on a value the store cannot read is reported as a live claim's",
  },
  {
    id: "guard-unreachable-as-in-flight",
    file: GUARD,
    text: `return reject(request, "unavailable", {});`,
    replacement: `return reject(request, "inFlight", { retryAfter: 1 });`,
    tests: [T.protocol],
    what: "an unreachable store answers 409 instead of 503",
  },
  {
    id: "guard-replayed-status-fixed",
    file: GUARD,
    text: "status: response.status,\n",
    replacement: "status: 200,\n",
    tests: [T.protocol],
    what: "the replayed event names 200 whatever status it replays",
  },
  {
    id: "guard-replayed-omitted-dropped",
    file: GUARD,
    text: "...(response.omitted ? { omitted: response.omitted } : {}),",
    replacement: "",
    tests: [T.protocol],
    what: "the replayed event of an omitted body does not say so",
  },
  {
    id: "guard-unreadable-hint-estimated",
    file: GUARD,
    text: "const retryAfter = unreadable\n      ? wholeSeconds(retryAfterMs)",
    replacement: "const retryAfter = false\n      ? wholeSeconds(retryAfterMs)",
    tests: [T.protocol],
    what:
      "an unreadable value's Retry-After is the settle estimate, not the store's hint",
  },
  {
    id: "guard-claimed-never-recovered",
    file: GUARD,
    text: `({ type: "claimed", slot, recovered })`,
    replacement: `({ type: "claimed", slot, recovered: false })`,
    tests: [T.protocol],
    what: "a claim that took over a lapsed lease is reported a fresh one",
  },
  {
    id: "guard-completed-mismatch-replayed",
    file: GUARD,
    text:
      "if (claim.fingerprint !== fingerprint) return this.#mismatch(flight);",
    replacement: "",
    tests: [T.protocol],
    what: "a key reused with another body after completion replays, not 422",
  },
  {
    id: "guard-in-flight-mismatch-as-conflict",
    file: GUARD,
    text:
      "if (claim.fingerprint !== null && claim.fingerprint !== fingerprint) {\n          return this.#mismatch(flight);",
    replacement: "if (false) {\n          return this.#mismatch(flight);",
    tests: [T.protocol],
    what: "a key reused with another body while in flight answers 409, not 422",
  },
  // src/events.ts: an event's time is since its request began.
  {
    id: "events-elapsed-since-origin",
    file: "src/events.ts",
    text: "const elapsedMs = performance.now() - started;",
    replacement: "const elapsedMs = performance.now();",
    tests: [T.protocol],
    what: "elapsedMs counts from the process's start, not the request's",
  },
  {
    id: "events-built-unheard",
    file: "src/events.ts",
    text: "if (listener === undefined) return () => {};",
    replacement: "if (listener === undefined) return (make) => void make();",
    tests: [T.protocol],
    what: "every event is built even when no one listens",
  },
  {
    id: "events-listener-throw-escapes",
    file: "src/events.ts",
    text:
      "} catch {\n      // A listener's throw must not change the answer.\n    }",
    replacement:
      "} finally {\n      // A listener's throw must not change the answer.\n    }",
    tests: [T.protocol],
    what: "a listener that throws turns the answer into a 500",
  },
  // src/_record.ts: the status range, the header value's bytes, the hint.
  {
    id: "record-status-from-201",
    file: "src/_record.ts",
    text: "(value as number) >= 200 &&",
    replacement: "(value as number) > 200 &&",
    tests: [T.recordHeaders],
    what: "a 200 record is unreadable: every 200 replay is a 409",
  },
  {
    id: "record-status-to-598",
    file: "src/_record.ts",
    text: "(value as number) <= 599;",
    replacement: "(value as number) < 599;",
    tests: [T.recordHeaders],
    what: "a 599 record is unreadable",
  },
  {
    id: "record-field-value-del",
    file: "src/_record.ts",
    text: String.raw`/^[\t\x20-\x7e\x80-\xff]*$/`,
    replacement: String.raw`/^[\t\x20-\x7f\x80-\xff]*$/`,
    tests: [T.recordHeaders],
    what: "a header value with DEL (0x7f) is stored and replayed",
  },
  {
    id: "record-hint-zero",
    file: "src/_record.ts",
    text: "retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)),",
    replacement: "retryAfterMs: Math.max(0, Math.ceil(retryAfterMs)),",
    tests: [T.recordHeaders],
    what: "an unreadable value may hint a Retry-After of 0 ms",
  },
  {
    id: "record-hint-rounded-down",
    file: "src/_record.ts",
    text: "retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)),",
    replacement: "retryAfterMs: Math.max(1, Math.floor(retryAfterMs)),",
    tests: [T.recordHeaders],
    what: "an unreadable value's hint is rounded down: a retry comes too soon",
  },
  {
    id: "record-body-and-reason",
    file: "src/_record.ts",
    text:
      `if (omitted !== undefined && omitted !== null && omitted !== "") return null;`,
    replacement: "",
    tests: [T.recordHeaders],
    what: "a record with a body and an omitted reason reads as a full one",
  },
  // src/fingerprint.ts: the 8 KiB switch to crypto.subtle.
  {
    id: "fingerprint-subtle-from-8193",
    file: "src/fingerprint.ts",
    text: "if (body.byteLength < SUBTLE_FROM_BYTES) return",
    replacement: "if (body.byteLength <= SUBTLE_FROM_BYTES) return",
    tests: ["tests/fingerprint_subtle_test.ts"],
    what: "a body of exactly 8 KiB is hashed synchronously",
  },
  {
    id: "fingerprint-subtle-head-dropped",
    file: "src/fingerprint.ts",
    text: "concatBytes([bytes, body], bytes.byteLength + body.byteLength)",
    replacement: "concatBytes([body], body.byteLength)",
    tests: ["tests/fingerprint_subtle_test.ts"],
    what: "from 8 KiB on, the method and path are not part of the fingerprint",
  },
  // src/hono.ts: whose headers win on a replay and on a problem.
  {
    id: "hono-replay-as-problem",
    file: "src/hono.ts",
    text: "problem ? PROBLEM_HEADERS : OWN_HEADERS,",
    replacement: "PROBLEM_HEADERS,",
    tests: ["tests/hono_test.ts"],
    what: "a replay drops earlier middleware's Cache-Control and Retry-After",
  },
  {
    id: "hono-problem-as-replay",
    file: "src/hono.ts",
    text: "problem ? PROBLEM_HEADERS : OWN_HEADERS,",
    replacement: "OWN_HEADERS,",
    tests: ["tests/hono_test.ts"],
    what: "a problem takes earlier middleware's Cache-Control: a 409 is cached",
  },
  {
    id: "hono-replay-content-type",
    file: "src/hono.ts",
    text: `const OWN_HEADERS = new Set(["content-type", "content-length"]);`,
    replacement: `const OWN_HEADERS = new Set(["content-length"]);`,
    tests: ["tests/hono_test.ts"],
    what: "earlier middleware's Content-Type replaces a replay's",
  },
  {
    id: "hono-replay-content-length",
    file: "src/hono.ts",
    text: `const OWN_HEADERS = new Set(["content-type", "content-length"]);`,
    replacement: `const OWN_HEADERS = new Set(["content-type"]);`,
    tests: ["tests/hono_test.ts"],
    what: "earlier middleware's Content-Length is sent with a replay's body",
  },

  // --- src/_completion.ts: the retry loop's numbers and outcomes -------------
  {
    id: "completion-release-attempts-3",
    file: "src/_completion.ts",
    text: "const RELEASE_ATTEMPTS = 4;",
    replacement: "const RELEASE_ATTEMPTS = 3;",
    tests: [T.completion],
    what: "a failing release is tried 3 times, not 4",
  },
  {
    id: "completion-release-attempts-5",
    file: "src/_completion.ts",
    text: "const RELEASE_ATTEMPTS = 4;",
    replacement: "const RELEASE_ATTEMPTS = 5;",
    tests: [T.completion],
    what: "a failing release is tried 5 times, not 4",
  },
  {
    id: "completion-attempts-inclusive",
    file: "src/_completion.ts",
    text: "retry.attempts >= retry.maxAttempts",
    replacement: "retry.attempts > retry.maxAttempts",
    tests: [T.completion],
    what: "a write is tried once more than its attempts allow",
  },
  {
    id: "completion-given-up-lost",
    file: "src/_completion.ts",
    text: 'retry.maxAttempts) return "unknown";',
    replacement: 'retry.maxAttempts) return "lost";',
    tests: [T.completion],
    what: "a write given up is reported fenced out (lost), not unknown",
  },
  {
    id: "completion-unanswered-lost",
    file: "src/_completion.ts",
    text: 'within(write(), ms) ?? "unknown"',
    replacement: 'within(write(), ms) ?? "lost"',
    tests: [T.completion],
    what: "an attempt unanswered at completionTimeout is reported lost",
  },
  {
    id: "completion-first-backoff",
    file: "src/_completion.ts",
    text: "const FIRST_BACKOFF_MS = 20;",
    replacement: "const FIRST_BACKOFF_MS = 40;",
    tests: [T.completion],
    what: "the first retry waits twice as long",
  },
  {
    id: "completion-backoff-max-1999",
    file: "src/_completion.ts",
    text: "const MAX_BACKOFF_MS = 2_000;",
    replacement: "const MAX_BACKOFF_MS = 1_999;",
    tests: [T.completion],
    what: "the backoff ceiling is a millisecond under 2 s",
  },
  {
    id: "completion-backoff-max-2001",
    file: "src/_completion.ts",
    text: "const MAX_BACKOFF_MS = 2_000;",
    replacement: "const MAX_BACKOFF_MS = 2_001;",
    tests: [T.completion],
    what: "the backoff ceiling is a millisecond over 2 s",
  },
  {
    id: "completion-backoff-half-lease",
    file: "src/_completion.ts",
    text: "this.#config.lease / 4",
    replacement: "this.#config.lease / 2",
    tests: [T.completion],
    what: "retries wait up to half a lease, not a quarter",
  },
  {
    id: "completion-backoff-max-ignored",
    file: "src/_completion.ts",
    text: "Math.min(MAX_BACKOFF_MS, Math.max(1, this.#config.lease / 4))",
    replacement: "Math.max(1, this.#config.lease / 4)",
    tests: [T.completion],
    what: "a long lease makes retries wait longer than 2 s",
  },
  {
    id: "completion-release-room",
    file: "src/_completion.ts",
    text: "if (this.#pending.size >= this.#config.maxPendingCompletions) {",
    replacement:
      "if (this.#pending.size > this.#config.maxPendingCompletions) {",
    tests: [T.completion],
    what: "a failed release is retried past maxPendingCompletions",
  },
  {
    id: "completion-wait-room",
    file: "src/_completion.ts",
    text: "while (!done && this.#pending.size >= this.#config",
    replacement: "while (!done && this.#pending.size > this.#config",
    tests: [T.completion],
    what: "a completion moves to the background past maxPendingCompletions",
  },
  {
    id: "completion-drain-once",
    file: "src/_completion.ts",
    text: "while (this.#pending.size > 0) await Promise.all(this.#pending);",
    replacement:
      "if (this.#pending.size > 0) await Promise.all(this.#pending);",
    tests: [T.completion],
    what:
      "drainCompletions() ends before a write that moved to the background during it",
  },
  {
    id: "completion-background-unflagged",
    file: "src/_completion.ts",
    text: "    background,\n  }), started);",
    replacement: "    background: false,\n  }), started);",
    tests: [T.completion],
    what: "a completion finished in the background is reported inline",
  },

  // --- src/_waiters.ts: leaving, the bound and each wait_ended reason --------
  {
    id: "waiters-gone-before-wait",
    file: "src/_waiters.ts",
    text: 'if (signal?.aborted) return ended("gone");',
    replacement: "",
    tests: ["tests/waiters_test.ts"],
    what:
      "a client gone before its wait (or during a claim) parks on until the bound",
  },
  {
    id: "waiters-gone-as-timed-out",
    file: "src/_waiters.ts",
    text: 'if (signal?.aborted) return ended("gone");',
    replacement: 'if (signal?.aborted) return ended("timed_out");',
    tests: ["tests/waiters_test.ts"],
    what: "a client gone before a step is reported timed_out",
  },
  {
    id: "waiters-aborted-as-timed-out",
    file: "src/_waiters.ts",
    text: 'if (outcome === "aborted") return ended("gone");',
    replacement: 'if (outcome === "aborted") return ended("timed_out");',
    tests: ["tests/waiters_test.ts"],
    what: "a client that left during a step is reported timed_out",
  },
  {
    id: "waiters-bound-as-gone",
    file: "src/_waiters.ts",
    text: 'if (left <= 0) return ended("timed_out");',
    replacement: 'if (left <= 0) return ended("gone");',
    tests: ["tests/waiters_test.ts"],
    what: "a wait past its bound between polls is reported gone",
  },
  {
    id: "waiters-parked-bound-as-gone",
    file: "src/_waiters.ts",
    text: 'if (outcome === "elapsed") return ended("timed_out");',
    replacement: 'if (outcome === "elapsed") return ended("gone");',
    tests: ["tests/waiters_test.ts"],
    what: "a parked wait past its bound is reported gone",
  },
  {
    id: "waiters-unreachable-as-timed-out",
    file: "src/_waiters.ts",
    text: 'ended("unreachable");',
    replacement: 'ended("timed_out");',
    tests: ["tests/waiters_test.ts"],
    what: "a poll whose claim threw is reported timed_out",
  },
  {
    id: "waiters-place-kept",
    file: "src/_waiters.ts",
    text: "waiters.leave();",
    replacement: "",
    tests: ["tests/waiters_test.ts"],
    what: "a wait that ended keeps its place: maxWaiting fills up for ever",
  },
  {
    id: "waiters-max-inclusive",
    file: "src/_waiters.ts",
    text: "if (this.#waiting >= this.max) return false;",
    replacement: "if (this.#waiting > this.max) return false;",
    tests: ["tests/waiters_test.ts"],
    what: "one more than maxWaiting wait at once",
  },

  // --- src/_heartbeat.ts: the renewal cadence and the capture cut-off --------
  {
    id: "heartbeat-due-exclusive",
    file: "src/_heartbeat.ts",
    text: "beat.renewedAt <= due",
    replacement: "beat.renewedAt < due",
    tests: ["tests/heartbeat_test.ts"],
    what: "a claim exactly a third of a lease old waits a tick more",
  },
  {
    id: "heartbeat-tick-fifth",
    file: "src/_heartbeat.ts",
    text: "Math.floor(this.#leaseMs / 6)",
    replacement: "Math.floor(this.#leaseMs / 5)",
    tests: ["tests/heartbeat_test.ts"],
    what: "the heartbeat ticks every fifth of a lease",
  },
  {
    id: "heartbeat-tick-ceil",
    file: "src/_heartbeat.ts",
    text: "Math.floor(this.#leaseMs / 6)",
    replacement: "Math.ceil(this.#leaseMs / 6)",
    tests: ["tests/heartbeat_test.ts"],
    what: "a lease not divisible by 6 ticks a little late",
  },
  {
    id: "heartbeat-due-half",
    file: "src/_heartbeat.ts",
    text: "this.#leaseMs / 3;",
    replacement: "this.#leaseMs / 2;",
    tests: ["tests/heartbeat_test.ts"],
    what: "claims are renewed only half a lease old",
  },
  {
    id: "heartbeat-capture-exclusive",
    file: "src/_heartbeat.ts",
    text: "now - beat.capturingSince! >= this.#leaseMs",
    replacement: "now - beat.capturingSince! > this.#leaseMs",
    tests: ["tests/heartbeat_test.ts"],
    what: "a capture a whole lease long goes on a tick more",
  },
  {
    id: "heartbeat-capture-half",
    file: "src/_heartbeat.ts",
    text: "now - beat.capturingSince! >= this.#leaseMs",
    replacement: "now - beat.capturingSince! >= this.#leaseMs / 2",
    tests: ["tests/heartbeat_test.ts"],
    what: "a capture is cut off after half a lease",
  },

  // --- src/_settle_estimate.ts: mean + 4 x deviation, within [1 s, lease] ----
  {
    id: "settle-deviation-3x",
    file: "src/_settle_estimate.ts",
    text: "this.#mean + 4 * this.#deviation",
    replacement: "this.#mean + 3 * this.#deviation",
    tests: ["tests/settle_estimate_test.ts"],
    what: "the estimate reads mean + 3 x deviation",
  },
  {
    id: "settle-deviation-5x",
    file: "src/_settle_estimate.ts",
    text: "this.#mean + 4 * this.#deviation",
    replacement: "this.#mean + 5 * this.#deviation",
    tests: ["tests/settle_estimate_test.ts"],
    what: "the estimate reads mean + 5 x deviation",
  },
  {
    id: "settle-floor-1001",
    file: "src/_settle_estimate.ts",
    text: "Math.max(1000, expected)",
    replacement: "Math.max(1001, expected)",
    tests: ["tests/settle_estimate_test.ts"],
    what: "the floor is a millisecond over 1 s: 2 s answered",
  },
  {
    id: "settle-lease-cap-ignored",
    file: "src/_settle_estimate.ts",
    text: "Math.min(leaseLeftMs, Math.max(1000, expected))",
    replacement: "Math.max(1000, expected)",
    tests: ["tests/settle_estimate_test.ts"],
    what: "a hint past the rest of the holder's lease",
  },
  {
    id: "settle-mean-gain",
    file: "src/_settle_estimate.ts",
    text: "0.875 * this.#mean + 0.125 * ms",
    replacement: "0.75 * this.#mean + 0.25 * ms",
    tests: ["tests/settle_estimate_test.ts"],
    what: "the mean moves with a gain of 1/4, not 1/8",
  },
  {
    id: "settle-deviation-gain",
    file: "src/_settle_estimate.ts",
    text: "0.75 * this.#deviation + 0.25 *",
    replacement: "0.875 * this.#deviation + 0.125 *",
    tests: ["tests/settle_estimate_test.ts"],
    what: "the deviation moves with a gain of 1/8, not 1/4",
  },
  {
    id: "settle-first-deviation",
    file: "src/_settle_estimate.ts",
    text: "this.#deviation = ms / 2;",
    replacement: "this.#deviation = ms;",
    tests: ["tests/settle_estimate_test.ts"],
    what: "the first run's deviation is the run, not half of it",
  },
  {
    id: "settle-zero-ignored",
    file: "src/_settle_estimate.ts",
    text: "if (!(ms >= 0) ||",
    replacement: "if (!(ms > 0) ||",
    tests: ["tests/settle_estimate_test.ts"],
    what: "a run of 0 ms is not counted: the hint stays the whole lease",
  },

  // --- src/_transaction.ts: each commit outcome and its answer ---------------
  {
    id: "transaction-lost-as-applied",
    file: "src/_transaction.ts",
    text: 'reportCompleted(report, beat, record, "lost");',
    replacement: 'reportCompleted(report, beat, record, "applied");',
    tests: ["tests/stores/postgres_transaction_test.ts"],
    what: "a commit fenced out (all rolled back) is reported applied",
  },
  {
    id: "transaction-lost-as-unavailable",
    file: "src/_transaction.ts",
    text: 'return reject(request, "inFlight", { retryAfter: 1 });\n  } catch',
    replacement: 'return reject(request, "unavailable", {});\n  } catch',
    tests: ["tests/stores/postgres_transaction_test.ts"],
    what: "a commit fenced out answers 503, not 409",
  },
  {
    id: "transaction-failed-as-conflict",
    file: "src/_transaction.ts",
    text: 'return reject(request, "unavailable", {});\n}',
    replacement: 'return reject(request, "inFlight", { retryAfter: 1 });\n}',
    tests: ["tests/stores/postgres_transaction_test.ts"],
    what: "a failed transaction whose release applied answers 409, not 503",
  },
];
