// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of the kernel: the record, the seal, the problems and the helpers (tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import { type Mutant, T } from "../_targets.ts";

const AEAD = "src/_aead.ts";
const SEAL = "src/_seal.ts";
const ENGINES = "tests/seal_engines_test.ts";

/** The mutants of the kernel: the record, the seal, the problems and the helpers. */
export const MUTANTS: Mutant[] = [
  {
    id: "capture-lone-chunk-aliased",
    file: "src/_bytes.ts",
    text: "return new Uint8Array(only);",
    replacement: "return only as Uint8Array<ArrayBuffer>;",
    tests: [T.capture],
    what: "a lone frame's prefix is a view of it: the record holds its buffer",
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
    id: "hmac-long-key-edge",
    file: "src/_sha256.ts",
    text: "if (key.byteLength > 64) {",
    replacement: "if (key.byteLength >= 64) {",
    tests: ["tests/sha256_test.ts"],
    what: "a secret of exactly 64 bytes is hashed first: not RFC 2104's HMAC",
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
    text: "JSON.stringify([version, id, slot, fingerprint, status, decided])",
    replacement: "JSON.stringify([version, id, fingerprint, status, decided])",
    tests: [...T.sealing],
    what:
      "a sealed record copied to another slot opens there: one caller's response replays to another's key",
  },
  {
    id: "seal-fingerprint-unbound",
    file: "src/_seal.ts",
    text: "JSON.stringify([version, id, slot, fingerprint, status, decided])",
    replacement: "JSON.stringify([version, id, slot, status, decided])",
    tests: [...T.sealing],
    what:
      "a sealed record whose stored fingerprint is changed replays to another body instead of 409",
  },
  {
    id: "seal-omitted-unbound",
    file: "src/_seal.ts",
    text: "JSON.stringify([version, id, slot, fingerprint, status, decided])",
    replacement: "JSON.stringify([version, id, slot, fingerprint, status])",
    tests: ["tests/seal_binding_test.ts"],
    what:
      "a bodiless sealed record's omitted reason rewritten in the store (too_large to stream_error) replays with the forged reason",
  },
  {
    id: "seal-store-dropped-bound",
    file: "src/_seal.ts",
    text: "omitted === undefined || omitted === STORE_DROPPED",
    replacement: "omitted === undefined",
    tests: ["tests/seal_binding_test.ts", ...T.sealing],
    what:
      "a sealed record whose body the store dropped (store_dropped) no longer opens: 409 instead of a bodiless replay",
  },
  {
    id: "seal-v2-unopened",
    file: "src/_seal.ts",
    text: 'if (version === "2") {',
    replacement: 'if (version === "0") {',
    tests: ["tests/seal_binding_test.ts"],
    what:
      "records sealed by version 2 no longer open after an upgrade: every one answers 409 until it expires",
  },
  {
    id: "seal-unknown-key-reason",
    file: "src/_seal.ts",
    text: "}, not among the keys given`;",
    replacement: "}, altered`;",
    tests: ["tests/seal_binding_test.ts", "tests/cli/cli_sealed_test.ts"],
    what:
      "the unreadable line and inspect no longer say that the record's key id is not among the keys",
  },
  {
    id: "import-keys-length",
    file: "src/encryption.ts",
    text: "if (bytes.byteLength !== KEY_BYTES) {",
    replacement: "if (bytes.byteLength < KEY_BYTES) {",
    tests: ["tests/encryption_keys_test.ts"],
    what:
      "a 33-byte key is accepted (and fails at importKey with a message naming no entry)",
  },
  {
    id: "problem-status-not-catalogue",
    file: "src/problem.ts",
    text: "  return CATALOGUE[kind].status;",
    replacement: "  return 400 as never;",
    tests: [...T.protocol],
    what:
      "a body over maxRequestBytes is reported rejected with 400, not its problem's 413",
  },
  {
    id: "assert-store-three-methods",
    file: "src/_validate.ts",
    text: 'for (const method of ["claim", "complete", "release", "extend"]) {',
    replacement: 'for (const method of ["claim", "complete", "release"]) {',
    tests: [
      "tests/idempotency_options_test.ts",
      "tests/stores/failover_test.ts",
    ],
    what: "a store without extend() is taken",
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
  // --- src/problem.ts (renderProblem), src/_settle_estimate.ts's first estimate ---
  {
    id: "problem-renderer-ignored",
    file: "src/problem.ts",
    text: "if (render === undefined) return standard(problem, headers);",
    replacement: "if (render !== null) return standard(problem, headers);",
    tests: [
      "tests/problem_renderer_test.ts",
      "tests/problem_renderer_stripe_test.ts",
    ],
    what: "renderProblem is never called: the Stripe SDK resolves a 422",
  },
  {
    id: "problem-render-any-status",
    file: "src/problem.ts",
    text: "const own = response.status >= 400 && response.status <= 599;",
    replacement: "const own = true;",
    tests: ["tests/problem_renderer_test.ts"],
    what: "a renderer that forgot `init` answers a 409 with 200",
  },
  {
    id: "problem-render-own-400-lost",
    file: "src/problem.ts",
    text: "const own = response.status >= 400 &&",
    replacement: "const own = response.status > 400 &&",
    tests: [
      "tests/problem_renderer_test.ts",
      "tests/problem_renderer_stripe_test.ts",
    ],
    what: "a renderer's deliberate 400 (Stripe's reused key) becomes 422",
  },
  {
    id: "problem-render-headers-not-added",
    file: "src/problem.ts",
    text:
      "const missing = headers.filter(([name]) => !response.headers.has(name));",
    replacement: "const missing: [string, string][] = [];",
    tests: ["tests/problem_renderer_test.ts"],
    what: "a renderer that forgot `init` drops Retry-After and Cache-Control",
  },
  {
    id: "problem-render-headers-overridden",
    file: "src/problem.ts",
    text: "([name]) => !response.headers.has(name)",
    replacement: "() => true",
    tests: ["tests/problem_renderer_test.ts"],
    what: "the renderer's own Retry-After and Cache-Control are replaced",
  },
  {
    id: "problem-render-throw-escapes",
    file: "src/problem.ts",
    text: "  } catch {\n    response = undefined;\n  }",
    replacement: "  } finally {\n    // nothing\n  }",
    tests: ["tests/problem_renderer_test.ts"],
    what: "a renderer that throws makes the request throw, not answer",
  },
  {
    id: "problem-rendered-unmarked",
    file: "src/problem.ts",
    text: "  PROBLEMS.add(answer);",
    replacement: "",
    tests: ["tests/problem_renderer_test.ts"],
    what: "Hono lays earlier middleware's Cache-Control over a rendered 409",
  },
  {
    id: "problem-standard-unmarked",
    file: "src/problem.ts",
    text: "  PROBLEMS.add(response);\n  return response;",
    replacement: "  return response;",
    tests: ["tests/hono_test.ts"],
    what: "Hono lays earlier middleware's Cache-Control over an RFC 9457 409",
  },
  {
    id: "options-unknown-accepted",
    file: "src/_validate.ts",
    text: "    if (known.includes(name)) continue;",
    replacement: "    continue;",
    tests: ["tests/misconfiguration_test.ts"],
    what: "a misspelt option (leaseMs) is silently accepted",
  },
  {
    id: "options-nearest-none",
    file: "src/_validate.ts",
    text: "return bestDistance <= Math.max(2, Math.ceil(name.length * 0.4))",
    replacement: "return bestDistance <= 0",
    tests: ["tests/misconfiguration_test.ts"],
    what: "a misspelt option's message names no nearest option",
  },
  {
    id: "problem-unreadable-409",
    file: "src/problem.ts",
    text: '    status: 500,\n    code: "idempotency_record_unreadable",',
    replacement: '    status: 409,\n    code: "idempotency_record_unreadable",',
    tests: [...T.protocol],
    what:
      "an unreadable record answers 409, which /client and Stripe's SDK retry on their own",
  },
  {
    id: "problem-unreadable-retry-after",
    file: "src/problem.ts",
    text: '    title: "Idempotency record unreadable",\n',
    replacement:
      '    title: "Idempotency record unreadable",\n    retryAfter: () => 30,\n',
    tests: [T.unreadable],
    what:
      "an unreadable record's answer carries a Retry-After that invites a day of retries",
  },
  // --- src/problem.ts: each problem's code and retryable (docs/problems.md) ---
  {
    id: "problem-code-copied",
    file: "src/problem.ts",
    text: 'code: "idempotency_key_invalid",',
    replacement: 'code: "idempotency_key_missing",',
    tests: ["tests/problem_renderer_test.ts"],
    what:
      "a malformed key is coded as a missing one: clients that match on code add a header they sent",
  },
  {
    id: "problem-incomplete-not-retryable",
    file: "src/problem.ts",
    text: '"idempotency_request_incomplete",\n    retryable: true,',
    replacement: '"idempotency_request_incomplete",\n    retryable: false,',
    tests: ["tests/problem_renderer_test.ts"],
    what:
      "a body that broke off says a retry cannot help, though nothing was claimed",
  },
  {
    id: "problem-unreadable-retryable",
    file: "src/problem.ts",
    text: '"idempotency_record_unreadable",\n    retryable: false,',
    replacement: '"idempotency_record_unreadable",\n    retryable: true,',
    tests: ["tests/problem_renderer_test.ts"],
    what:
      "an unreadable record's 500 says retryable: Stripe's SDK retries it for as long as it lives",
  },
  {
    id: "problem-code-left-out",
    file: "src/problem.ts",
    text: "    code,\n    retryable,\n  };",
    replacement: "    retryable,\n  } as Problem;",
    tests: ["tests/problem_renderer_test.ts"],
    what:
      "the body has no code: a client matching on it sees every problem alike",
  },
  // src/_aead.ts and the seal's version 4 (issue 34): the in-line cipher.
  {
    id: "aead-tag-unchecked",
    file: AEAD,
    text: "const last = decipher.final(); // throws on a bad tag",
    replacement: "const last = new Uint8Array(0);",
    tests: [ENGINES],
    what:
      "a sealed record changed in the store opens in line: forged bytes replay",
  },
  {
    id: "aead-aad-unbound",
    file: AEAD,
    text: "const text = cipher.setAAD(UTF8.encode(data)).update(plain);",
    replacement: "const text = cipher.update(plain);",
    tests: [ENGINES],
    what:
      "the in-line seal binds no slot or fingerprint: a record moved to another key opens there",
  },
  {
    id: "aead-nonce-fixed",
    file: AEAD,
    text: "return crypto.getRandomValues(new Uint8Array(NONCE));",
    replacement: "return new Uint8Array(NONCE);",
    tests: [ENGINES],
    what:
      "every record sealed under one nonce: GCM's key stream and tag key leak",
  },
  {
    id: "aead-in-line-seal-bound",
    file: AEAD,
    text:
      "if (plain.byteLength > IN_LINE_BYTES) return subtle.seal(data, plain);",
    replacement:
      "if (plain.byteLength >= IN_LINE_BYTES) return subtle.seal(data, plain);",
    tests: [ENGINES],
    what: "a body of exactly 16 KiB is sealed through crypto.subtle's hop",
  },
  {
    id: "aead-in-line-open-bound",
    file: AEAD,
    text: "if (end - NONCE > IN_LINE_BYTES) return subtle.open(data, sealed);",
    replacement:
      "if (end - NONCE > IN_LINE_BYTES + 1) return subtle.open(data, sealed);",
    tests: [ENGINES],
    what: "a body one byte over 16 KiB is opened in line, at 6 ns a byte",
  },
  {
    id: "aead-unprobed",
    file: AEAD,
    text: 'node!.createCipheriv("aes-256-gcm", k, nonce(), TAG).final();',
    replacement: "",
    tests: [ENGINES],
    what:
      "a node:crypto without AES-256-GCM is taken: every seal throws instead of using crypto.subtle",
  },
  {
    id: "seal-v4-opened-as-v3",
    file: SEAL,
    text: "body && version === VERSION",
    replacement: 'body && version === "5"',
    tests: [...T.sealing, ENGINES],
    what:
      "a version 4 body is opened as version 3: the replay's body starts with the header list",
  },
  {
    id: "seal-v3-unopened",
    file: SEAL,
    text: 'const VERSIONS = new Set(["2", "3", VERSION]);',
    replacement: 'const VERSIONS = new Set(["2", VERSION]);',
    tests: ["tests/seal_binding_test.ts"],
    what:
      "records sealed by version 3 no longer open after the upgrade to 4: each answers 500 until it expires",
  },
  {
    id: "seal-label-headers-empty",
    file: SEAL,
    text: "const sealed = toBase64Url(await key.seal(clear, headers));",
    replacement:
      "const sealed = toBase64Url(await key.seal(clear, new Uint8Array(2)));",
    tests: ["tests/seal_binding_test.ts", ...T.sealing],
    what:
      "the label's copy of the headers is not written: a record whose body a store dropped no longer opens",
  },
];
