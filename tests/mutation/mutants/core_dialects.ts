// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of the dialects: jsonFingerprint (src/_jcs.ts), the key option, per-request lifetimes, advertiseLifetime and CORS (tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import {
  CONFIGURE,
  GUARD,
  type Mutant,
  OPTIONS,
  REQUEST,
  RESPONSE,
} from "../_targets.ts";

const JCS = "src/_jcs.ts";
const JSON_FP = "tests/fingerprint_json_test.ts";
const KEY_OPTION = "tests/idempotency_key_option_test.ts";

/** The mutants of the dialects. */
export const MUTANTS: Mutant[] = [
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
    id: "key-keyless-passes-through",
    file: CONFIGURE,
    text: "keyless: !required && key === undefined,",
    replacement: "keyless: !required,",
    tests: [KEY_OPTION],
    what: "with a key function a request without the header is never guarded",
  },
  {
    id: "key-header-read-first",
    file: GUARD,
    text: "if (keyOf === undefined) {\n      if (value === null)",
    replacement:
      "if (value !== null || keyOf === undefined) {\n      if (value === null)",
    tests: [KEY_OPTION],
    what: "with a key function the header decides when there is one",
  },
  {
    id: "key-undefined-required-passes",
    file: GUARD,
    text: "if (found === undefined && config.required) {",
    replacement: "if (found === undefined && !config.keyless && false) {",
    tests: [KEY_OPTION],
    what:
      "required: true runs the handler unguarded when the function finds no key",
  },
  {
    id: "key-keyless-body-consumed",
    file: GUARD,
    text: "return await this.#handler(rebuild(request, body), ...args);",
    replacement: "return await this.#handler(request, ...args);",
    tests: [KEY_OPTION],
    what: "a keyless request's handler gets a body already read",
  },
  {
    id: "key-not-checked",
    file: "src/_refusals.ts",
    text: "const parsed = parseIdempotencyKey(value);",
    replacement:
      'const parsed = parseIdempotencyKey(by ? `"${value}"` : value);',
    tests: [KEY_OPTION],
    what:
      "a function's key is read as a quoted string: a bare 'a b' the header refuses is claimed",
  },
  {
    id: "key-error-rethrown",
    file: REQUEST,
    text: "return { error: new Error(\"'key' threw\", { cause: error }) };",
    replacement: "throw error;",
    tests: [KEY_OPTION],
    what:
      "a key function that throws escapes to the server: no problem, no event, no line",
  },
  {
    id: "key-non-string-accepted",
    file: REQUEST,
    text: 'if (value === undefined || typeof value === "string") return value;',
    replacement:
      'if (value === undefined || typeof value !== "symbol") return value === undefined ? value : String(value);',
    tests: [KEY_OPTION],
    what: "a number or object is coerced to a key with String(), unreported",
  },
  {
    id: "key-lifetime-skipped",
    file: GUARD,
    text: "const refused = this.#no.checked(flight, found, by);",
    replacement:
      "const refused = this.#no.checked({ ...flight }, found, by);\n      flight.key = found;",
    tests: [KEY_OPTION],
    what: "a body-keyed request is claimed without its ttl and lease",
  },
  // --- issue 31: per-request lifetimes, advertiseLifetime, CORS -----------
  {
    id: "lifetime-function-unchecked",
    file: CONFIGURE,
    text: "return positiveMs(name, ms);",
    replacement: "return ms as number;",
    tests: ["tests/idempotency_lifetime_test.ts"],
    what: "a ttl function returning NaN or a string reaches the store's claim",
  },
  {
    id: "lifetime-lease-past-ttl-per-request",
    file: CONFIGURE,
    text: 'return lifetimeChecked(of("ttl", ttl), of("lease", lease));',
    replacement:
      'return { ttlMs: of("ttl", ttl), leaseMs: of("lease", lease) };',
    tests: ["tests/idempotency_lifetime_test.ts"],
    what:
      "a lease function longer than the ttl claims a lease the record outlives",
  },
  {
    id: "lifetime-throw-escapes",
    file: CONFIGURE,
    text: "  } catch (error) {\n    return { error };\n  }",
    replacement: "  } catch (error) {\n    throw error;\n  }",
    tests: [
      "tests/idempotency_lifetime_test.ts",
      "tests/problem_renderer_test.ts",
    ],
    what:
      "a ttl function that throws escapes the middleware: no problem, no event, no line",
  },
  {
    id: "lifetime-claim-uses-defaults",
    file: GUARD,
    text: "{ fingerprint, ...flight.lifetime! }",
    replacement: "{ fingerprint, leaseMs: 30_000, ttlMs: 86_400_000 }",
    tests: ["tests/idempotency_lifetime_test.ts"],
    what: "every route's key is kept 24 hours whatever its ttl function says",
  },
  {
    id: "heartbeat-shorter-lease-not-rescheduled",
    file: "src/_heartbeat.ts",
    text: "      this.#cancel?.();\n      this.#ticking = false;\n",
    replacement: "",
    tests: ["tests/idempotency_lifetime_test.ts"],
    what:
      "a short-lease claim waits for a long lease's tick and loses its key mid-handler",
  },
  {
    id: "heartbeat-extends-by-default-lease",
    file: "src/_heartbeat.ts",
    text: "this.#store.extend(beat.slot, beat.token, beat.leaseMs)",
    replacement: "this.#store.extend(beat.slot, beat.token, this.#leaseMs)",
    tests: ["tests/idempotency_lifetime_test.ts", "tests/heartbeat_test.ts"],
    what: "renewals under a lease function extend by no lease at all",
  },
  {
    id: "lifetime-header-rounded",
    file: GUARD,
    text: "Math.floor(flight.lifetime!.ttlMs / 1000)",
    replacement: "Math.round(flight.lifetime!.ttlMs / 1000)",
    tests: ["tests/idempotency_lifetime_test.ts"],
    what:
      "Idempotency-TTL promises up to half a second more than the key is kept",
  },
  {
    id: "lifetime-header-not-replayed",
    file: GUARD,
    text:
      "    return this.#advertised(\n      flight,\n      replay(response, replayHeader, unstoredHeaders),\n    );",
    replacement: "    return replay(response, replayHeader, unstoredHeaders);",
    tests: ["tests/idempotency_lifetime_test.ts"],
    what: "a replay does not say how long its key lasts",
  },
  {
    id: "lifetime-header-default-on",
    file: OPTIONS,
    text: "advertiseLifetime: false,",
    replacement: "advertiseLifetime: true,",
    tests: ["tests/idempotency_lifetime_test.ts"],
    what: "every existing record's replay gains a header",
  },
  {
    id: "lifetime-header-immutable-throws",
    file: RESPONSE,
    text:
      "    const copy = new Response(response.body, response);\n    put(copy);\n    return copy;",
    replacement: "    return response;",
    tests: ["tests/idempotency_lifetime_test.ts"],
    what: "a Response.redirect() answer goes without its Idempotency-TTL",
  },
  {
    id: "option-error-unreported",
    file: "src/_refusals.ts",
    text:
      'const event = () => ({ type: "option_error" as const, slot: null, error });',
    replacement:
      'const event = () => ({ type: "mismatch" as const, slot: null });',
    tests: ["tests/idempotency_lifetime_test.ts"],
    what:
      "a failing ttl function answers 500 with no event and no line in the log",
  },
  {
    id: "cors-origin-ignored",
    file: RESPONSE,
    text: '!request.headers.has("origin") &&\n    ',
    replacement: "",
    tests: ["tests/idempotency_cors_test.ts", "tests/cors_browser_test.ts"],
    what:
      "a CORS layer outside the middleware hides Idempotent-Replayed from the page",
  },
  {
    id: "cors-duplicate-names",
    file: RESPONSE,
    text: "headers.has(name) && !listed.has(name)",
    replacement: "headers.has(name)",
    tests: ["tests/idempotency_cors_test.ts"],
    what: "a name the handler exposed is listed twice",
  },
  {
    id: "cors-case-sensitive",
    file: RESPONSE,
    text: "map((name) => name.trim().toLowerCase())",
    replacement: "map((name) => name.trim())",
    tests: ["tests/idempotency_cors_test.ts"],
    what: "IDEMPOTENT-REPLAYED listed by the handler is listed again",
  },
  {
    id: "cors-star-counts",
    file: RESPONSE,
    text: "if (names.length === 0) return response;",
    replacement: 'if (names.length === 0 || listed.has("*")) return response;',
    tests: ["tests/idempotency_cors_test.ts", "tests/cors_browser_test.ts"],
    what:
      "a credentialed page cannot read the replay header beside the handler's *",
  },
  {
    id: "cors-list-replaced",
    file: RESPONSE,
    text: 'withHeader(response, EXPOSE, names.join(", "), true)',
    replacement: 'withHeader(response, EXPOSE, names.join(", "), false)',
    tests: ["tests/idempotency_cors_test.ts"],
    what: "the handler's own exposed names are dropped from its replay",
  },
  {
    id: "cors-retry-after-hidden",
    file: RESPONSE,
    text: '  if (isProblem(response)) ours.push("retry-after");\n',
    replacement: "",
    tests: ["tests/idempotency_cors_test.ts"],
    what: "a browser cannot read a 409's Retry-After",
  },
  {
    id: "cors-hono-not-exposed-again",
    file: "src/hono.ts",
    text: "c.res = guard.exposed(request, response);",
    replacement: "c.res = response;",
    tests: ["tests/idempotency_cors_test.ts"],
    what: "hono/cors's exposeHeaders erases ours on every replay",
  },
];
