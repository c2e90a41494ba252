// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of the guard, the response it answers and the events and log it emits (tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import { GUARD, type Mutant, RESPONSE, T } from "../_targets.ts";

/** The mutants of the guard, the response it answers and the events and log it emits. */
export const MUTANTS: Mutant[] = [
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
  // --- the terminal rule -----------------------------------------------------
  {
    id: "terminal-null-body-released",
    file: GUARD,
    text: `    if (captured === null) {
      const record = { status, headers, body: EMPTY };`,
    replacement: `    if (captured === null) {
      await this.#completions.release(flight.beat!, "not_cacheable");
      return response;
      const record = { status, headers, body: EMPTY };`,
    tests: [T.guardCapture, ...T.protocol],
    what: "a 2xx without a body is released: a retry runs the handler again",
  },
  {
    id: "terminal-throwing-predicate-releases",
    file: GUARD,
    text: "counts as cacheable.\n      return true;",
    replacement: "counts as cacheable.\n      return false;",
    tests: [T.guardCapture, ...T.protocol, T.edges],
    what: "a cacheable() that throws releases the key after a 2xx",
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
      "new Response(bodyInit(body, typed), {\n          status,\n          statusText,\n          headers: partial ? response.headers : headers,\n        }),",
    replacement: "response,",
    tests: [T.guardCapture, ...T.protocol],
    what: "rule 2: the client gets the handler's already-read response",
  },
  {
    id: "rule6-unreadable-is-mismatch",
    file: GUARD,
    text: `if (claim.fingerprint === null) {
          return await this.#unreadable(flight, claim.retryAfterMs);
        }`,
    replacement: "if (false) {",
    tests: [T.e2e],
    what: "rule 6: an unreadable value answers 422 instead of 500 unreadable",
  },
  {
    id: "rule7-slot-ignores-scope",
    file: GUARD,
    text: `typeof scope === "string" ? scope : await scope,`,
    replacement: `"",`,
    tests: [...T.protocol],
    what: "rule 7: two tenants that send the same key share a response",
  },
  {
    id: "rule10-malformed-key-sanitized",
    file: "src/_refusals.ts",
    text: "const parsed = parseIdempotencyKey(value);",
    replacement:
      'const parsed = parseIdempotencyKey(value.replace(/[^\\x21-\\x7e]/g, ""));',
    tests: [...T.protocol],
    what: "rule 10: a malformed key is cleaned up and claimed, not a 400",
  },
  {
    id: "seal-read-without-keys",
    file: GUARD,
    text: "? unsealedReason(claim.response) ?? { record: claim.response }",
    replacement: "? { record: claim.response }",
    tests: [...T.sealing],
    what:
      "a sealed record read with encryption off replays its ciphertext as the body",
  },
  // src/_guard.ts: each problem's status and event, the replay's event.
  {
    id: "guard-too-large-reason-malformed",
    file: "src/_refusals.ts",
    text: '? "too_large"\n      : kind as "missing" | "malformed";',
    replacement: '? "malformed"\n      : kind as "missing" | "malformed";',
    tests: [...T.protocol],
    what: "a 413 is reported as a malformed key",
  },
  {
    id: "guard-incomplete-status-413",
    file: "src/_refusals.ts",
    text: 'reason = "incomplete", status = 400;',
    replacement: 'reason = "incomplete", status = 413;',
    tests: [...T.protocol],
    what: "a request body that broke off is reported as a 413",
  },
  {
    id: "guard-conflict-never-unreadable",
    file: GUARD,
    text: "      unreadable: true,\n      ...(expiresAt",
    replacement: "      unreadable: false,\n      ...(expiresAt",
    tests: [...T.protocol],
    what:
      "a 500 on a value the store cannot read is reported as a live claim's 409",
  },
  {
    id: "guard-unreadable-as-in-flight",
    file: "src/_guard.ts",
    text: 'this.#no.problem(flight, "unreadable", {}, () => ({',
    replacement:
      'this.#no.problem(flight, "inFlight" as "unreadable", { retryAfter: 30 } as Record<never, never>, () => ({',
    tests: [...T.protocol],
    what:
      "an unreadable record answers the in-flight 409 with a Retry-After, inviting retries that cannot succeed",
  },
  {
    id: "guard-unreadable-expiry-dropped",
    file: GUARD,
    text: 'if (found.state !== "absent") expiresAt = found.expiresAt;',
    replacement: "",
    tests: [T.unreadable],
    what:
      "an unreadable value's event lacks its expiry: a value without a TTL is not logged as staying for ever",
  },
  {
    id: "log-unreadable-forever-as-expiring",
    file: "src/_log.ts",
    text: "(Redis: no TTL), so it may stay for ever:",
    replacement: "(Redis: no TTL), so it stays until it expires:",
    tests: [T.logging],
    what:
      "a value without a TTL is logged as if it expired: 'until they expire'",
  },
  {
    id: "guard-unreachable-as-in-flight",
    file: GUARD,
    text:
      `return await problemResponse(request, "unavailable", {}, renderProblem);`,
    replacement:
      `return await problemResponse(request, "inFlight", { retryAfter: 1 }, renderProblem);`,
    tests: [...T.protocol],
    what: "an unreachable store answers 409 instead of 503",
  },
  {
    id: "guard-replayed-status-fixed",
    file: GUARD,
    text: "status: response.status,\n",
    replacement: "status: 200,\n",
    tests: [...T.protocol],
    what: "the replayed event names 200 whatever status it replays",
  },
  {
    id: "guard-replayed-omitted-dropped",
    file: GUARD,
    text: "...(response.omitted ? { omitted: response.omitted } : {}),",
    replacement: "",
    tests: [...T.protocol],
    what: "the replayed event of an omitted body does not say so",
  },
  {
    id: "guard-claimed-never-recovered",
    file: GUARD,
    text: `({ type: "claimed", slot, recovered })`,
    replacement: `({ type: "claimed", slot, recovered: false })`,
    tests: [...T.protocol],
    what: "a claim that took over a lapsed lease is reported a fresh one",
  },
  {
    id: "guard-completed-mismatch-replayed",
    file: "src/_guard.ts",
    text:
      "        if (claim.fingerprint !== fingerprint) return this.#no.mismatch(flight);\n        const { encryption } = config;",
    replacement: "        const { encryption } = config;",
    tests: [...T.protocol],
    what: "a key reused with another body after completion replays, not 422",
  },
  {
    id: "guard-in-flight-mismatch-as-conflict",
    file: "src/_guard.ts",
    text:
      "        if (claim.fingerprint !== fingerprint) return this.#no.mismatch(flight);\n        return this.#conflict(",
    replacement: "        return this.#conflict(",
    tests: [...T.protocol],
    what: "a key reused with another body while in flight answers 409, not 422",
  },
  // src/events.ts: an event's time is since its request began.
  {
    id: "events-elapsed-since-origin",
    file: "src/events.ts",
    text: "const elapsedMs = clock.now() - started;",
    replacement: "const elapsedMs = clock.now();",
    tests: [...T.protocol],
    what: "elapsedMs counts from the process's start, not the request's",
  },
  {
    id: "events-built-unheard",
    file: "src/events.ts",
    text: "if (listener === undefined) return () => {};",
    replacement: "if (listener === undefined) return (make) => void make();",
    tests: [...T.protocol],
    what: "every event is built even when no one listens",
  },
  {
    id: "events-listener-throw-escapes",
    file: "src/events.ts",
    text:
      "} catch {\n      // A listener's throw must not change the answer.\n    }",
    replacement:
      "} finally {\n      // A listener's throw must not change the answer.\n    }",
    tests: [...T.protocol],
    what: "a listener that throws turns the answer into a 500",
  },
  {
    id: "response-overflow-as-too-slow",
    file: RESPONSE,
    text:
      'omitted: captured.outcome === "overflow" ? "too_large" : "too_slow",',
    replacement:
      'omitted: captured.outcome === "overflow" ? "too_slow" : "too_large",',
    tests: [T.edges],
    what: "a body over maxResponseBytes is replayed as omitted too_slow",
  },
  {
    id: "response-cancelled-as-stream-error",
    file: RESPONSE,
    text: 'isAbort(captured.error) ? "cancelled" : "stream_error"',
    replacement: '"stream_error"',
    tests: [T.edges],
    what: "a body its stream aborted is replayed as a stream error",
  },
  {
    id: "response-205-with-body",
    file: RESPONSE,
    text: "const NULL_BODY = new Set([101, 103, 204, 205, 304]);",
    replacement: "const NULL_BODY = new Set([101, 103, 204, 304]);",
    tests: [T.edges],
    what: "the replay of a 205 is given a body: a TypeError, a 500",
  },
  {
    id: "response-live-cancel-dropped-mid-read",
    file: RESPONSE,
    text: "return reader ? reader.cancel(reason) : rest.cancel(reason);",
    replacement: "return reader ? undefined : rest.cancel(reason);",
    tests: [T.edges],
    what:
      "a client that leaves an overflowing body mid-read never cancels the handler's stream",
  },
  {
    id: "response-date-named-omitted",
    file: RESPONSE,
    text: 'if (name !== "date" && name !== LEFT_OUT) left.add(name);',
    replacement: "if (name !== LEFT_OUT) left.add(name);",
    tests: [T.edges],
    what: "every replay names Date as a header left out",
  },
  {
    id: "guard-waited-unmarked",
    file: GUARD,
    text: "this.#replay(flight, opened.record, claim !== first)",
    replacement: "this.#replay(flight, opened.record, false)",
    tests: ["tests/otel_test.ts"],
    what: "a replay after a wait does not say it waited",
  },
  {
    id: "guard-unavailable-unreported",
    file: GUARD,
    text: '() => ({ type: "unavailable", slot, error }),',
    replacement: '() => ({ type: "fail_open", slot, error }),',
    tests: ["tests/otel_test.ts"],
    what: "a 503 is reported by no event",
  },
  {
    id: "guard-conflict-unrendered",
    file: GUARD,
    text:
      `problemResponse(flight.request, "inFlight", { retryAfter }, render);`,
    replacement: `problemResponse(flight.request, "inFlight", { retryAfter });`,
    tests: [
      "tests/problem_renderer_test.ts",
      "tests/problem_renderer_stripe_test.ts",
    ],
    what: "a 409 in flight stays RFC 9457 under renderProblem",
  },
  {
    id: "log-no-rate-limit",
    file: "src/_log.ts",
    text: "(now >= window.until && window.count === 0)",
    replacement: "now >= 0",
    tests: ["tests/logging_test.ts", "tests/misconfiguration_test.ts"],
    what: "every event of a kind is a line: a failing store floods the log",
  },
  {
    id: "log-count-dropped",
    file: "src/_log.ts",
    text: "window.count++;",
    replacement: "",
    tests: ["tests/logging_test.ts"],
    what: "the minute's line never comes: what was held back is not counted",
  },
  {
    id: "log-lease-lost-silent",
    file: "src/_log.ts",
    text: 'case "lease_lost":',
    replacement: 'case ("lease_lost" as string).slice(1):',
    tests: ["tests/logging_test.ts"],
    what: "a handler that may run twice is not logged",
  },
  {
    id: "log-default-off",
    file: "src/_log.ts",
    text: "const to = logger === undefined ? globalThis.console : logger;",
    replacement:
      "if (logger === undefined) return onEvent;\n  const to = logger;",
    tests: ["tests/logging_test.ts", "tests/misconfiguration_test.ts"],
    what: "misconfiguration is silent again: no console line by default",
  },
  {
    id: "log-silent-beside-onevent",
    file: "src/_log.ts",
    text: "if (logger === false) return onEvent;",
    replacement:
      "if (logger === false || (logger === undefined && onEvent)) return onEvent;",
    tests: ["tests/logging_test.ts", "tests/logging_store_test.ts"],
    what: "adding onEvent (metrics) turns the default log off again",
  },
  {
    id: "log-failover-fallback-silent",
    file: "src/_log.ts",
    text:
      "const log = logs.get(logger) ?? lineWriter(storeLineOf, logger, clock);",
    replacement:
      'const log = logs.get(logger) ?? lineWriter((e: StoreReport) => e.type === "fallback" ? undefined : storeLineOf(e), logger, clock);',
    tests: ["tests/logging_store_test.ts"],
    what: "a Redis outage under FailoverStore is silent again",
  },
  {
    id: "log-store-unsubscribed",
    file: "src/_log.ts",
    text: "store.subscribe(storeLog(store, to as Logger, clock));",
    replacement: "void storeLog;",
    tests: ["tests/logging_store_test.ts"],
    what: "the middleware's log never hears the store's reports",
  },
  {
    id: "log-store-per-middleware",
    file: "src/_log.ts",
    text:
      "const log = logs.get(logger) ?? lineWriter(storeLineOf, logger, clock);",
    replacement: "const log = lineWriter(storeLineOf, logger, clock);",
    tests: ["tests/logging_store_test.ts"],
    what: "every middleware on one store writes each fallback again",
  },
  {
    id: "held-body-cap-boundary",
    file: RESPONSE,
    text: "if (owned.byteLength <= cap) {",
    replacement: "if (owned.byteLength < cap) {",
    tests: ["tests/whole_body_test.ts"],
    what: "a body in memory of exactly maxResponseBytes is not recorded",
  },
  {
    id: "held-body-uncapped",
    file: RESPONSE,
    text: "if (owned.byteLength <= cap) {",
    replacement: "if (owned.byteLength >= 0) {",
    tests: ["tests/whole_body_test.ts"],
    what: "a body in memory over maxResponseBytes is recorded whole",
  },
  {
    id: "held-body-stream-taken",
    file: RESPONSE,
    text: '(typeof body.body === "string" || body.body instanceof Uint8Array);',
    replacement: "true;",
    tests: ["tests/whole_body_test.ts", T.guardCapture],
    what: "a streamed body is read whole, past the cap and the lease",
  },
  {
    id: "held-body-never",
    file: RESPONSE,
    text: "if (held(response)) {",
    replacement: "if (false) {",
    tests: ["tests/whole_body_test.ts"],
    what: "a body held in memory goes through a stream and a capture",
  },
  {
    id: "guard-claimed-unmarked",
    file: GUARD,
    text: "      markClaimed(request);\n",
    replacement: "",
    tests: [T.keyless],
    what:
      "a request a FailoverStore claimed gets a plain transaction that commits apart from its record",
  },
];
