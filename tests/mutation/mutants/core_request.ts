// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of the request's way in: reading, options, keys and fingerprints (tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import {
  CONFIGURE,
  GUARD,
  type Mutant,
  OPTIONS,
  REQUEST,
  T,
} from "../_targets.ts";

const JCS = "src/_jcs.ts";
const JSON_FP = "tests/fingerprint_json_test.ts";
const KEY_OPTION = "tests/idempotency_key_option_test.ts";

/** The mutants of the request's way in: reading, options, keys and fingerprints. */
export const MUTANTS: Mutant[] = [
  {
    id: "cookies-stored-by-default",
    file: CONFIGURE,
    text: `: new Set([...unstored, "set-cookie"]),`,
    replacement: `: unstored,`,
    tests: [T.credentials],
    what: "every session cookie sits in the store and goes to whoever replays",
  },
  {
    id: "unstored-list-stores-cookies",
    file: CONFIGURE,
    text: `unstoredHeaders: option("storeSetCookie", optionalBoolean)`,
    replacement:
      `unstoredHeaders: options.unstoredHeaders !== undefined || option("storeSetCookie", optionalBoolean)`,
    tests: [T.unstored],
    what:
      'unstoredHeaders: ["x-request-id"] stores and replays session cookies',
  },
  {
    id: "store-set-cookie-ignored",
    file: CONFIGURE,
    text: `option("storeSetCookie", optionalBoolean)\n      ? unstored`,
    replacement:
      `optionalBoolean("storeSetCookie", options.storeSetCookie) && false\n      ? unstored`,
    tests: [T.unstored, T.credentials],
    what: "storeSetCookie: true still leaves every cookie out of records",
  },
  {
    id: "scope-empty-accepted",
    file: REQUEST,
    text: `typeof id === "string" && id !== "" ? id`,
    replacement: `typeof id === "string" ? id`,
    tests: [T.options],
    what: 'a scope function returning "" shares the key space of "global"',
  },
  {
    id: "scope-empty-async-accepted",
    file: REQUEST,
    text: `if (id !== "") return id;`,
    replacement: `return id;`,
    tests: [T.options],
    what:
      'an async scope function resolving "" shares the key space of "global"',
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
  {
    id: "rule7-global-scope-hashed-as-text",
    file: CONFIGURE,
    text: `if (scope === "global") return undefined;`,
    replacement: `if (scope === "global") return () => "global";`,
    tests: [T.options],
    what: 'rule 7: scope "global" moves every slot of the empty scope',
  },
  {
    id: "rule8-unguarded-method-guarded",
    file: CONFIGURE,
    text:
      "unguarded.has(method) ||\n    (!methods.has(method) && !methods.has(method.toUpperCase()))",
    replacement: "false",
    tests: [...T.protocol],
    what: "rule 8: a GET with a key is read, hashed and claimed",
  },
  {
    id: "rule9-streamed-body-unbounded",
    file: REQUEST,
    text: "if (total > max) {",
    replacement: "if (total > max * 2) {",
    tests: [...T.protocol],
    what: "rule 9: a streamed request body may be buffered to twice the bound",
  },
  {
    id: "method-case-sensitive",
    file: CONFIGURE,
    text: "&& !methods.has(method.toUpperCase()))",
    replacement: ")",
    tests: [T.hostile],
    what: "a request sent as `patch` bypasses the guard and runs twice",
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
    id: "key-comma-accepted",
    file: "src/key.ts",
    text: "    if (c === 0x2c) return COMMA;\n    if (c < 0x21 || c > 0x7e) {",
    replacement: "    if (c < 0x21 || c > 0x7e) {",
    tests: [T.key],
    what:
      "a bare key with a comma is accepted: two header lines read as one key",
  },
  {
    id: "forbidden-method-guarded",
    file: CONFIGURE,
    text: "if (forbidden !== undefined) {",
    replacement: "if (false) {",
    tests: [T.options],
    what:
      "a guarded TRACE is claimed, then the rebuilt request throws: 500, key held",
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
  // --- issue 25: the key parser (key.ts) ------------------------------------
  {
    id: "key-length-counts-whitespace",
    file: "src/key.ts",
    text: "if (end - start > MAX_KEY_LENGTH) return tooLong(end - start);",
    replacement:
      "if (value.length > MAX_KEY_LENGTH) return tooLong(value.length);",
    tests: [T.key],
    what: "a bare 255-character key with whitespace around is refused",
  },
  {
    id: "key-bare-255-refused",
    file: "src/key.ts",
    text: "if (end - start > MAX_KEY_LENGTH)",
    replacement: "if (end - start >= MAX_KEY_LENGTH)",
    tests: [T.key],
    what: "a bare key of exactly 255 characters is refused",
  },
  {
    id: "key-quoted-counts-escapes",
    file: "src/key.ts",
    text: "if (key.length > MAX_KEY_LENGTH) return tooLong(key.length);",
    replacement:
      "if (end - start - 2 > MAX_KEY_LENGTH) return tooLong(key.length);",
    tests: [T.key],
    what: "a quoted 255-character key with an escape is refused",
  },
  {
    id: "key-quoted-255-refused",
    file: "src/key.ts",
    text: "if (key.length > MAX_KEY_LENGTH)",
    replacement: "if (key.length >= MAX_KEY_LENGTH)",
    tests: [T.key],
    what: "a quoted key of exactly 255 characters is refused",
  },
  // --- issue 25: the request body (_request.ts) -------------------------------
  {
    id: "request-declared-at-limit-refused",
    file: REQUEST,
    text: "if (length > max) {",
    replacement: "if (length >= max) {",
    tests: [...T.protocol],
    what: "a Content-Length of exactly maxRequestBytes is a 413",
  },
  {
    id: "request-streamed-at-limit-refused",
    file: REQUEST,
    text: "if (total > max) {",
    replacement: "if (total >= max) {",
    tests: [...T.protocol],
    what: "a streamed body of exactly maxRequestBytes is a 413",
  },
  {
    id: "request-declared-unchecked",
    file: REQUEST,
    text: "if (declared !== null && /^\\d+$/.test(declared)) {",
    replacement: "if (false) {",
    tests: [...T.protocol],
    what: "a Content-Length over the bound is claimed and read, not a 413",
  },
  {
    id: "request-declared-not-digits-trusted",
    file: REQUEST,
    text: " && /^\\d+$/.test(declared)) {",
    replacement: ") {",
    tests: [...T.protocol],
    what: "a Content-Length of 1e3 is taken for a length: a 413 for 50 bytes",
  },
  {
    id: "request-read-body-unchecked",
    file: REQUEST,
    text: "if (request.bodyUsed) {",
    replacement: "if (false) {",
    tests: [...T.protocol],
    what:
      "a body read before idempotency() fails with an error that says nothing of where to read it",
  },
  {
    id: "request-declared-over-not-cancelled",
    file: REQUEST,
    text:
      "await request.body?.cancel().catch(() => {});\n      return TOO_LARGE;",
    replacement: "return TOO_LARGE;",
    tests: [...T.protocol],
    what:
      "a body declared over the bound is left uncancelled: the connection's rest waits",
  },
  {
    id: "request-streamed-over-not-cancelled",
    file: REQUEST,
    text: "await reader.cancel().catch(() => {});\n        return TOO_LARGE;",
    replacement: "return TOO_LARGE;",
    tests: [...T.protocol],
    what:
      "a streamed body over the bound is left uncancelled: the connection's rest waits",
  },
  {
    id: "request-empty-body-sent",
    file: REQUEST,
    text: "body: body.byteLength === 0 ? null : bodyInit(body, typed),",
    replacement: "body: bodyInit(body, typed),",
    tests: [...T.protocol],
    what: "an empty request body reaches the handler as a stream of nothing",
  },
  // --- issue 25: the option bounds (options.ts) -------------------------------
  {
    id: "options-lease-equal-ttl-refused",
    file: CONFIGURE,
    text: "if (lease > ttl) {",
    replacement: "if (lease >= ttl) {",
    tests: [T.options],
    what: "a lease equal to the ttl is refused",
  },
  {
    id: "options-lease-past-ttl-taken",
    file: CONFIGURE,
    text: "if (lease > ttl) {",
    replacement: "if (lease > ttl + 1) {",
    tests: [T.options],
    what: "a lease a millisecond over the ttl is taken",
  },
  {
    id: "options-wait-equal-timeout-refused",
    file: CONFIGURE,
    text: "if (completionWait > completionTimeout) {",
    replacement: "if (completionWait >= completionTimeout) {",
    tests: [T.options],
    what: "a completionWait equal to completionTimeout is refused",
  },
  {
    id: "options-wait-past-timeout-taken",
    file: CONFIGURE,
    text: "if (completionWait > completionTimeout) {",
    replacement: "if (completionWait > completionTimeout + 1) {",
    tests: [T.options],
    what: "a completionWait a millisecond over completionTimeout is taken",
  },
  {
    id: "options-ttl-zero-taken",
    file: CONFIGURE,
    text: 'option("ttl", positiveMs)',
    replacement: 'option("ttl", nonNegativeMs)',
    tests: [T.options],
    what: "a ttl of 0 is taken",
  },
  {
    id: "options-completion-timeout-zero-taken",
    file: CONFIGURE,
    text: 'option("completionTimeout", positiveMs)',
    replacement: 'option("completionTimeout", nonNegativeMs)',
    tests: [T.options],
    what: "a completionTimeout of 0 is taken",
  },
  {
    id: "options-max-waiting-zero-refused",
    file: CONFIGURE,
    text: 'option("maxWaiting", nonNegativeInteger)',
    replacement: 'option("maxWaiting", positiveMs)', // refuses 0
    tests: [T.options],
    what: "a maxWaiting of 0 (documented: every duplicate 409s) is refused",
  },
  {
    id: "options-max-pending-zero-refused",
    file: CONFIGURE,
    text: 'option("maxPendingCompletions", nonNegativeInteger)',
    replacement: 'option("maxPendingCompletions", positiveMs)', // refuses 0
    tests: [T.options],
    what:
      "a maxPendingCompletions of 0 (documented: all wait inline) is refused",
  },
  {
    id: "options-default-lease-31s",
    file: OPTIONS,
    text: "  lease: 30_000,\n",
    replacement: "  lease: 31_000,\n",
    tests: [T.options],
    what: "the documented 30 s lease becomes 31 s: a ttl of 30 s is refused",
  },
  {
    id: "options-default-completion-wait-2s",
    file: OPTIONS,
    text: "  completionWait: 1_000,\n",
    replacement: "  completionWait: 2_000,\n",
    tests: [T.options],
    what:
      "the documented 1 s completionWait doubles: a completionTimeout of 1 s is refused",
  },
  {
    id: "options-default-ttl-short",
    file: OPTIONS,
    text: "  ttl: 86_400_000,\n",
    replacement: "  ttl: 86_399_999,\n",
    tests: [T.options],
    what: "the documented 24 h ttl is a millisecond short",
  },
  {
    id: "options-default-completion-timeout-short",
    file: OPTIONS,
    text: "  completionTimeout: 300_000,\n",
    replacement: "  completionTimeout: 299_999,\n",
    tests: [T.options],
    what: "the documented 5 min completionTimeout is a millisecond short",
  },
  {
    id: "options-default-request-bytes-short",
    file: OPTIONS,
    text: "  maxRequestBytes: 1_048_576,\n",
    replacement: "  maxRequestBytes: 1_048_575,\n",
    tests: [...T.protocol],
    what: "a request body of the documented 1 MiB is a 413",
  },
  {
    id: "options-default-response-bytes-short",
    file: OPTIONS,
    text: "  maxResponseBytes: 1_048_576,\n",
    replacement: "  maxResponseBytes: 1_048_575,\n",
    tests: [T.edges],
    what: "a response body of the documented 1 MiB is not recorded",
  },
  // --- issue 25: capture and the recorded body (_capture.ts, _response.ts) ----
  {
    id: "capture-overflow-rest-released",
    file: "src/_capture.ts",
    text: "      finished = true;\n      const head = cap - seen;",
    replacement: "      const head = cap - seen;",
    tests: [T.capture],
    what: "a stop that settles after an overflow breaks the live body's rest",
  },
  {
    id: "response-cap-plus-one-recorded",
    file: "src/_capture.ts",
    text: "if (seen + frame.byteLength > cap) {",
    replacement: "if (seen + frame.byteLength > cap + 1) {",
    tests: [T.edges, T.capture],
    what: "a body one byte over maxResponseBytes is recorded whole",
  },
  {
    id: "capture-stop-rejection-ignored",
    file: "src/_capture.ts",
    text: "stop?.then(halt, halt);",
    replacement: "stop?.then(halt);",
    tests: [T.capture],
    what:
      "a stop that rejects never ends the capture: a slow body holds the record",
  },
  {
    id: "options-render-unchecked",
    file: CONFIGURE,
    text: `optionalFunction("renderProblem", options.renderProblem)`,
    replacement: "options.renderProblem",
    tests: ["tests/problem_renderer_test.ts"],
    what: "a renderProblem that is not a function is taken",
  },
  {
    id: "options-max-waiting-no-effect",
    file: CONFIGURE,
    text: "    waitForInFlight > 0,\n  );",
    replacement: "    true,\n  );",
    tests: ["tests/misconfiguration_test.ts"],
    what: "maxWaiting without waitForInFlight is silently accepted",
  },
  {
    id: "key-space-reason",
    file: "src/key.ts",
    text: "const what = c === 0x20",
    replacement: "const what = c === 0x21",
    tests: ["tests/key_test.ts", "tests/misconfiguration_test.ts"],
    what: "a bare key with a space is refused without saying it is the space",
  },
  {
    id: "options-render-error-unreported",
    file: CONFIGURE,
    text:
      'report(() => ({ type: "render_error", slot: null, error }), started);',
    replacement: "",
    tests: ["tests/problem_renderer_test.ts"],
    what: "a renderer's throw falls back in silence",
  },
  // --- bodies read in one call (issue 24) ---------------------------------
  {
    id: "whole-body-unserved",
    file: REQUEST,
    text: "if (served(request)) return await wholeBody(request, length);",
    replacement: "if (true) return await wholeBody(request, length);",
    tests: [T.hostile, "tests/whole_body_test.ts"],
    what:
      "a request built in code is read whole by its Content-Length, unbounded",
  },
  {
    id: "whole-body-length-trusted",
    file: REQUEST,
    text: "if (bytes.byteLength === length) return",
    replacement: "if (bytes.byteLength >= 0) return",
    tests: ["tests/whole_body_test.ts"],
    what: "a served body whose length is not its Content-Length is taken",
  },
  {
    id: "whole-body-never-served",
    file: REQUEST,
    text: 'return state?.constructor?.name === "InnerRequest";',
    replacement: "return false;",
    tests: ["tests/whole_body_test.ts"],
    what: "Deno.serve's requests go through the reader loop again",
  },
  // --- jsonFingerprint (src/_jcs.ts) and the `key` option -------------------
  {
    id: "jcs-keys-unsorted",
    file: JCS,
    text: "Object.keys(value).sort()",
    replacement: "Object.keys(value)",
    tests: [JSON_FP],
    what: "members keep the client's order: a retry that reorders keys is 422",
  },
  {
    id: "jcs-lenient-utf8",
    file: JCS,
    text: 'new TextDecoder("utf-8", { fatal: true })',
    replacement: 'new TextDecoder("utf-8")',
    tests: [JSON_FP],
    what: "two invalid UTF-8 bodies read alike (U+FFFD) share a fingerprint",
  },
  {
    id: "jcs-exact-limit-exclusive",
    file: JCS,
    text: "Math.abs(value) >= EXACT_BELOW",
    replacement: "Math.abs(value) > EXACT_BELOW",
    tests: [JSON_FP],
    what: "9007199254740993 reads as 2^53 unchecked: two ids collide",
  },
  {
    id: "jcs-exponents-read-as-integers",
    file: JCS,
    text: "token[0] === '\"' || fraction || exponent",
    replacement: "token[0] === '\"' || fraction",
    tests: [JSON_FP],
    what: "RFC 8785's own 1E30 sends its body to the bytes",
  },
  {
    id: "jcs-strings-scanned-as-numbers",
    file: JCS,
    text: "if (token[0] === '\"' || fraction",
    replacement: "if (fraction",
    tests: [JSON_FP],
    what: "a digit run inside a string sends a body past 2^53 to the bytes",
  },
  {
    id: "jcs-infinity-as-null",
    file: JCS,
    text: "if (!Number.isFinite(value)) return undefined;",
    replacement: "",
    tests: [JSON_FP],
    what: "1e400 is written null: a body with 1e400 and one with null collide",
  },
  {
    id: "jcs-fallback-hashes-nothing",
    file: "src/fingerprint.ts",
    text: "(body.buffer instanceof ArrayBuffer ? body : new Uint8Array(body));",
    replacement: "new Uint8Array(0);",
    tests: [JSON_FP],
    what: "every body that is not JSON has one fingerprint: no 422 among them",
  },
  {
    id: "jcs-option-not-recognised",
    file: REQUEST,
    text: "if (fingerprint === jsonFingerprint) {",
    replacement: "if (fingerprint === jsonFingerprint.bind(null)) {",
    tests: [JSON_FP],
    what:
      "jsonFingerprint is hashed again as a custom value: not what it tells",
  },
  {
    id: "key-header-read-first",
    file: GUARD,
    text: "if (config.key !== undefined) return await this.#keyed(flight);",
    replacement: "",
    tests: [KEY_OPTION],
    what:
      "with a key function the header decides: a webhook without one is 400",
  },
  {
    id: "key-keyless-passes-through",
    file: CONFIGURE,
    text: "keyless: !required && key === undefined,",
    replacement: "keyless: !required,",
    tests: [KEY_OPTION],
    what: "with a key function a request without the header is never guarded",
  },
  {
    id: "key-undefined-required-passes",
    file: GUARD,
    text:
      'if (required) return this.#refuse(flight, "missing", { header });\n      return await this.#handler(',
    replacement: "return await this.#handler(",
    tests: [KEY_OPTION],
    what:
      "required: true runs the handler unguarded when the function finds no key",
  },
  {
    id: "key-keyless-body-consumed",
    file: GUARD,
    text:
      "{ header });\n      return await this.#handler(rebuild(request, body), ...flight.args);",
    replacement:
      "{ header });\n      return await this.#handler(request, ...flight.args);",
    tests: [KEY_OPTION],
    what: "a keyless request's handler gets a body already read",
  },
  {
    id: "key-error-answered-missing",
    file: GUARD,
    text: "throw error;\n    }\n    if (value === undefined) {",
    replacement:
      'return this.#refuse(flight, "missing", { header });\n    }\n    if (value === undefined) {',
    tests: [KEY_OPTION],
    what:
      "a key function that throws answers 400 missing, hiding the bug from the server's log",
  },
  {
    id: "key-not-checked",
    file: GUARD,
    text:
      "const parsed = parseIdempotencyKey(value);\n    if (parsed.ok) return",
    replacement:
      'const parsed = { ok: true as const, key: value, reason: "" };\n    if (parsed.ok) return',
    tests: [KEY_OPTION],
    what:
      "a function's key of 256 characters, a comma or a control byte is kept",
  },
  {
    id: "key-error-uncounted",
    file: GUARD,
    text: 'const status = 500, reason = "key_error";\n      this.#report(',
    replacement:
      'const status = 500, reason = "key_error";\n      ((..._: unknown[]) => {})(',
    tests: [KEY_OPTION],
    what: "a key function that throws leaves no event and no log line",
  },
  {
    id: "key-error-not-logged",
    file: "src/_log.ts",
    text: 'if (event.reason !== "key_error") return undefined;',
    replacement:
      'if (event.reason !== "key_error" || event.slot === null) return undefined;',
    tests: [KEY_OPTION],
    what: "a key function failing on every request is silent in the log",
  },
];
