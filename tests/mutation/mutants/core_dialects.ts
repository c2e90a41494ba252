// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of the dialects: jsonFingerprint (src/_jcs.ts) and the key option (tests/mutation/mutants.ts runs them all).

 * @module
 */

import { CONFIGURE, GUARD, type Mutant, REQUEST } from "../_targets.ts";

const JCS = "src/_jcs.ts";
const JSON_FP = "tests/fingerprint_json_test.ts";
const KEY_OPTION = "tests/idempotency_key_option_test.ts";

/** The mutants of mutants of the dialects: jsonFingerprint (src/_jcs.ts) and the key option. */
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
];
