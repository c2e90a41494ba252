// Copyright 2026 the @idempotent/http authors. MIT license.
/** The middleware's options, their defaults, and {@linkcode configure}. @module */

import type { Clock } from "./_async.ts";
import { HEARTBEAT_CLOCK } from "./_heartbeat.ts";
import { LOG_CLOCK, withLog } from "./_log.ts";
import { Sealer } from "./_seal.ts";
import {
  headerName,
  headerNames,
  knownOptions,
  needsOption,
  nonNegativeInteger,
  nonNegativeMs,
  optionalBoolean,
  optionalFunction,
  positiveMs,
} from "./_validate.ts";
import { type IdempotencyEvent, type Report, reporter } from "./events.ts";
import { hasherOf } from "./fingerprint.ts";
import type { ProblemRenderer } from "./problem.ts";
import type { IdempotencyStore } from "./store.ts";
import { MemoryStore } from "./stores/memory.ts";

/** The `info` `Deno.serve` passes a handler, written out to name no `Deno` type. */
export interface ServeHandlerInfo {
  /** The remote address of the connection, as `Deno.Addr`. */
  remoteAddr:
    | { transport: "tcp" | "udp"; hostname: string; port: number }
    | { transport: "unix" | "unixpacket"; path: string }
    | { transport: "vsock"; cid: number; port: number };
  /** Settles when the response has been sent (rejects if it could not be). */
  completed: Promise<void>;
}

/**
 * A fetch handler: `Deno.serve`'s shape, with whatever arguments follow the
 * request (`info` for `Deno.serve`, `env` and `ctx` elsewhere) passed through.
 */
export type FetchHandler<A extends unknown[] = [info?: ServeHandlerInfo]> = (
  request: Request,
  ...args: A
) => Response | Promise<Response>;

/** Options of {@linkcode idempotency}. Every field but `scope` is optional. */
export interface IdempotencyOptions {
  /**
   * Where records are kept; instances that must see each other's keys share one.
   * @default {new MemoryStore()}
   */
  store?: IdempotencyStore;
  /**
   * Required: the stable id (not `""`) of the user, tenant or API client a
   * request acts for, resolved after authentication (may be async; a throw
   * propagates), or `"global"` for one key space shared by every caller
   * (README, Security).
   *
   * @example Scoped by the authenticated account
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const accounts = new Map([["key-of-alice", "acct_1"]]); // your auth's
   * const handler = idempotency(() => new Response("ok", { status: 201 }), {
   *   scope: (request) => {
   *     const account = accounts.get(request.headers.get("x-api-key") ?? "");
   *     if (account === undefined) throw new Error("unauthenticated");
   *     return account;
   *   },
   * });
   * const headers = { "idempotency-key": "k1", "x-api-key": "key-of-alice" };
   * const res = await handler(new Request("http://localhost/pay", { method: "POST", headers }));
   * assert.equal(res.status, 201);
   * ```
   */
  scope: ((request: Request) => string | Promise<string>) | "global";
  /**
   * The request header that carries the key.
   * @default {"Idempotency-Key"}
   */
  header?: string;
  /**
   * The methods guarded, in any case, but `CONNECT`, `TRACE` and `TRACK`.
   * @default {["POST", "PATCH"]}
   */
  methods?: readonly string[];
  /**
   * Requests of a guarded method to pass through, asked before the key is read.
   * @default {undefined} (none skipped)
   */
  skip?: (request: Request) => boolean;
  /**
   * Whether a guarded request without a key is answered 400, not passed through.
   * @default {false}
   */
  required?: boolean;
  /**
   * How long a record is kept, in milliseconds, from the first claim.
   * @default {86_400_000} (24 hours)
   */
  ttl?: number;
  /**
   * How long a claim is owned without renewal, in milliseconds (renewed while
   * the handler runs): past it, after a crash, a retry runs the handler again.
   * @default {30_000}
   */
  lease?: number;
  /**
   * The largest request body buffered for the fingerprint; larger: 413.
   * @default {1_048_576} (1 MiB)
   */
  maxRequestBytes?: number;
  /**
   * The largest response body recorded; a larger one is streamed, not recorded.
   * @default {1_048_576} (1 MiB)
   */
  maxResponseBytes?: number;
  /**
   * Which responses are recorded; the others release the key for a retry.
   * @default {(response) => response.ok} (2xx)
   */
  cacheable?: (response: Response) => boolean;
  /**
   * The request's fingerprint (same key, another one: 422), hashed to store.
   * @default {requestFingerprint} (method, path with query, body)
   */
  fingerprint?: (
    request: Request,
    body: Uint8Array,
  ) => string | Promise<string>;
  /**
   * 32 random bytes or more (a string as UTF-8), the same on every instance:
   * slots and fingerprints are HMAC-SHA-256 under it; changing it moves every
   * slot (README, Security).
   * @default {undefined} (SHA-256)
   *
   * @example Under a secret, and a key's slot found
   * ```ts
   * import { idempotency, MemoryStore, slotOf } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * // From the app's secret store (`openssl rand -hex 32`), not a literal.
   * const secret = "d2f1c8e7b6a5948372615f4e3d2c1b0a99887766554433221100ffeeddccbbaa";
   * const store = new MemoryStore();
   * const handler = idempotency(() => new Response("ok"), { scope: "global", store, secret });
   * const headers = { "idempotency-key": "k1" };
   * await handler(new Request("http://api.test/", { method: "POST", headers }));
   * const slot = slotOf("", "k1", { secret }); // "global" is scope "".
   * const claim = { fingerprint: "", leaseMs: 1_000, ttlMs: 1_000 };
   * assert.equal((await store.claim(slot, claim)).state, "completed");
   * ```
   */
  secret?: string | Uint8Array;
  /**
   * Whether to run the handler unguarded, not answer 503, when the store is down.
   * @default {false}
   */
  failOpen?: boolean;
  /**
   * Response headers (any case) the live response keeps but a record does not,
   * besides `Set-Cookie` unless `storeSetCookie`; a list replaces the default.
   * @default {["date"]}
   */
  unstoredHeaders?: readonly string[];
  /**
   * Whether records keep `Set-Cookie`: the store then holds the first caller's
   * session cookies, and every replay hands them to whoever sends the key.
   * @default {false}
   */
  storeSetCookie?: boolean;
  /**
   * Seals records: the headers, and the body apart, as AES-256-GCM
   * ciphertexts bound to the slot and the fingerprint; the first key seals,
   * every key listed opens (README, Security). In clear stay the status, why
   * no body, the key id, the fingerprint, the TTL and lease, and the body's
   * length (about). Nonces are random (96 bits): rotate the key well before
   * 2^32 seals (two a record).
   * @default {undefined} (records in clear)
   *
   * @example Sealed records, replayed as the handler answered
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const aes = { name: "AES-GCM", length: 256 };
   * const key = await crypto.subtle.generateKey(aes, false, ["encrypt", "decrypt"]);
   * const handler = idempotency(() => Response.json({ card: "4242" }), {
   *   scope: "global",
   *   encryption: { keys: [{ id: "2026-01", key }] },
   * });
   * const post = () => new Request("http://localhost/pay", { method: "POST", headers: { "idempotency-key": "k1" } });
   * await (await handler(post())).text();
   * const replay = await handler(post());
   * assert.deepEqual(await replay.json(), { card: "4242" });
   * ```
   */
  encryption?: {
    /** The keys, the sealing one first. */
    keys: readonly {
      /** Its name, stored with each record it seals: 1 to 32 visible ASCII characters but `;`. */
      id: string;
      /** An AES-GCM `CryptoKey` of 256 bits, for `encrypt` and `decrypt`. */
      key: Parameters<typeof crypto.subtle.encrypt>[1];
    }[];
  };
  /**
   * The response header that marks a replay, with the value `true`.
   * @default {"Idempotent-Replayed"}
   */
  replayHeader?: string;
  /**
   * Renders each problem (400, 409, 413, 422, 503) as the application's own
   * error response, for an API that has an error format (README, Status
   * codes). It gets the problem's fields, `retryAfter` (seconds) when any,
   * the request, and `init`, the answer's status and headers to spread into
   * its `Response`. The answer keeps the status unless the renderer returns
   * another 4xx or 5xx, and gets the problem's `Cache-Control` and
   * `Retry-After` when it lacks them; a renderer that throws, rejects or
   * returns no `Response` gets the RFC 9457 problem instead.
   * @default {undefined} (RFC 9457 `application/problem+json`)
   *
   * @example Stripe-shaped errors
   * ```ts
   * import { idempotency, PROBLEM_TYPES } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const handler = idempotency(() => Response.json({ id: "ch_1" }), {
   *   scope: "global",
   *   renderProblem: (problem) =>
   *     Response.json({
   *       error: {
   *         type: problem.type === PROBLEM_TYPES.unavailable ? "api_error" : "idempotency_error",
   *         message: problem.detail,
   *       },
   *     }, problem.init),
   * });
   * const charge = (amount: number) =>
   *   handler(new Request("http://api.test/v1/charges", {
   *     method: "POST",
   *     headers: { "idempotency-key": "k1" },
   *     body: `amount=${amount}`,
   *   }));
   * await (await charge(100)).text();
   * const reused = await charge(200);
   * assert.equal(reused.status, 422);
   * assert.equal(reused.headers.get("content-type"), "application/json");
   * assert.equal((await reused.json()).error.type, "idempotency_error");
   * ```
   */
  renderProblem?: ProblemRenderer;
  /**
   * Receives every {@linkcode IdempotencyEvent}, synchronously; a throw is ignored.
   * @default {undefined}
   */
  onEvent?: (event: IdempotencyEvent) => void;
  /**
   * Where the events that mean something is wrong are written, one line
   * each: `store_error` and a record's write given up with `error`;
   * `fail_open`, `lease_lost` and an unreadable record with `warn`. The
   * first of each kind is written at once, with its cause and what to do
   * (``call `await client.connect()` ``); later ones at most one line a
   * minute, with their count. `false` writes nothing. When `onEvent` is
   * given, nothing is written unless `logger` is given too.
   * @default {console} (without `onEvent`)
   *
   * @example Lines into the app's logger
   * ```ts
   * import { idempotency, MemoryStore } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const lines: string[] = [];
   * const logger = { warn: (line: string) => lines.push(line), error: (line: string) => lines.push(line) };
   * const store = new MemoryStore({ maxEntries: 1 }); // full after one claim
   * const handler = idempotency(() => new Response("slow"), { scope: "global", store, logger });
   * await store.claim("taken", { fingerprint: "", leaseMs: 60_000, ttlMs: 60_000 });
   * const post = new Request("http://localhost/", { method: "POST", headers: { "idempotency-key": "k1" } });
   * assert.equal((await handler(post)).status, 503);
   * assert.match(lines[0]!, /store_error: the store's claim failed .*MemoryStore is full/);
   * ```
   */
  logger?: false | {
    /** Writes a line about something that may run a handler twice. */
    warn(...data: unknown[]): void;
    /** Writes a line about something that fails requests or loses a record. */
    error(...data: unknown[]): void;
  };
  /**
   * How long (ms, from a failed write) a response waits for its record's write.
   * @default {1_000}
   */
  completionWait?: number;
  /**
   * How long (ms, from a failed write) a record's write is retried, then given up.
   * @default {300_000} (5 minutes)
   */
  completionTimeout?: number;
  /**
   * How many record writes one instance retries in the background; past it, responses wait.
   * @default {100}
   */
  maxPendingCompletions?: number;
  /**
   * How long, in milliseconds, a duplicate of a running request waits for its
   * replay instead of a 409 (0: at once). Waiting reads `request.signal`, of
   * which `Deno.serve` prints a notice unless `--unstable-no-legacy-abort`.
   * @default {0}
   */
  waitForInFlight?: number;
  /**
   * How many duplicates one instance lets wait at once; past it: 409. Only
   * with `waitForInFlight` above 0 (else a `TypeError`: it would do nothing).
   * @default {1_000}
   */
  maxWaiting?: number;
}

/** The options' default values. */
export const DEFAULTS = Object.freeze({
  header: "Idempotency-Key",
  methods: Object.freeze(["POST", "PATCH"]) as readonly string[],
  required: false,
  ttl: 86_400_000,
  lease: 30_000,
  maxRequestBytes: 1_048_576,
  maxResponseBytes: 1_048_576,
  failOpen: false,
  unstoredHeaders: Object.freeze(["date"]) as readonly string[],
  storeSetCookie: false,
  replayHeader: "Idempotent-Replayed",
  completionWait: 1_000,
  completionTimeout: 300_000,
  maxPendingCompletions: 100,
  waitForInFlight: 0,
  maxWaiting: 1_000,
});

/** Every option's name, for the misspelling check (the compiler keeps it whole). */
const OPTION_NAMES = Object.keys(
  {
    store: true,
    scope: true,
    header: true,
    methods: true,
    skip: true,
    required: true,
    ttl: true,
    lease: true,
    maxRequestBytes: true,
    maxResponseBytes: true,
    cacheable: true,
    fingerprint: true,
    secret: true,
    failOpen: true,
    unstoredHeaders: true,
    storeSetCookie: true,
    encryption: true,
    replayHeader: true,
    onEvent: true,
    logger: true,
    renderProblem: true,
    completionWait: true,
    completionTimeout: true,
    maxPendingCompletions: true,
    waitForInFlight: true,
    maxWaiting: true,
  } satisfies Record<keyof IdempotencyOptions, true>,
);

/** The options checked, defaults filled in, header names lower case. */
export type Config = ReturnType<typeof configure>;

/** Checks the options (`TypeError`, `RangeError`) and fills in their defaults. */
// deno-lint-ignore explicit-module-boundary-types -- its return type is `Config`
export function configure(options: IdempotencyOptions) {
  // Without options (from JavaScript), the `scope` check says what to pass.
  if (options === undefined) options = {} as IdempotencyOptions;
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `'options' must be an object: current value is ${options}`,
    );
  }
  knownOptions("idempotency()", options, OPTION_NAMES);
  const option = <T>(
    name: keyof typeof DEFAULTS,
    check: (name: string, value: unknown) => T,
  ): T => check(name, options[name] ?? DEFAULTS[name]);
  const store: IdempotencyStore = options.store ?? new MemoryStore();
  for (const method of ["claim", "complete", "release", "extend"] as const) {
    if (typeof store?.[method] !== "function") {
      throw new TypeError(
        `'store' must implement IdempotencyStore: '${method}' is not a function`,
      );
    }
  }
  const methods = options.methods ?? DEFAULTS.methods;
  const shown = () => JSON.stringify(methods);
  if (
    !Array.isArray(methods) || methods.length === 0 ||
    !methods.every((m) => typeof m === "string" && /^[A-Za-z]+$/.test(m))
  ) {
    throw new TypeError(
      `'methods' must be a non-empty list of method names: current value is ${shown()}`,
    );
  }
  const forbidden = methods.find((m) => FORBIDDEN_METHODS.has(m.toUpperCase()));
  if (forbidden !== undefined) {
    throw new TypeError(
      `'methods' cannot guard ${forbidden}: \`new Request()\` refuses that method, so its handler could never be given the request: current value is ${shown()}`,
    );
  }
  const ttl = option("ttl", positiveMs);
  const lease = option("lease", positiveMs);
  if (lease > ttl) {
    throw new RangeError(
      `'lease' must not exceed 'ttl' (${ttl}): current value is ${lease}`,
    );
  }
  const completionWait = option("completionWait", nonNegativeMs);
  const completionTimeout = option("completionTimeout", positiveMs);
  if (completionWait > completionTimeout) {
    throw new RangeError(
      `'completionWait' must not exceed 'completionTimeout' (${completionTimeout}): current value is ${completionWait}`,
    );
  }
  const unstored = option("unstoredHeaders", headerNames);
  const guarded = new Set(methods.map((m) => m.toUpperCase()));
  const waitForInFlight = option("waitForInFlight", nonNegativeMs);
  const maxWaiting = option("maxWaiting", nonNegativeInteger);
  needsOption(
    "maxWaiting",
    options.maxWaiting !== undefined,
    "'waitForInFlight' above 0",
    waitForInFlight > 0,
  );
  const hooks = options as { [HEARTBEAT_CLOCK]?: Clock; [LOG_CLOCK]?: Clock };
  const onEvent = optionalFunction("onEvent", options.onEvent);
  const listener = withLog(onEvent, options.logger, hooks[LOG_CLOCK]);
  const render = optionalFunction("renderProblem", options.renderProblem);
  return {
    store,
    scope: scopeOption(options.scope),
    header: option("header", headerName),
    methods: guarded, // Upper case.
    // The standard methods not in `methods`, as `Request` spells them.
    unguarded: new Set(STANDARD_METHODS.filter((m) => !guarded.has(m))),
    required: option("required", optionalBoolean),
    ttl,
    lease,
    maxRequestBytes: option("maxRequestBytes", nonNegativeInteger),
    maxResponseBytes: option("maxResponseBytes", nonNegativeInteger),
    cacheable: optionalFunction("cacheable", options.cacheable) ??
      ((response: Response) => response.ok),
    fingerprint: optionalFunction("fingerprint", options.fingerprint),
    hasher: hasherOf(options.secret), // Plain, or under `secret`.
    failOpen: option("failOpen", optionalBoolean),
    replayHeader: option("replayHeader", headerName),
    renderProblem: render && reportingFailures(render, reporter(listener)),
    encryption: Sealer.of(options.encryption),
    unstoredHeaders: option("storeSetCookie", optionalBoolean)
      ? unstored
      : new Set([...unstored, "set-cookie"]),
    onEvent: listener,
    completionWait,
    completionTimeout,
    maxPendingCompletions: option("maxPendingCompletions", nonNegativeInteger),
    heartbeatClock: hooks[HEARTBEAT_CLOCK], // A test's, else the system's.
    waitForInFlight,
    maxWaiting,
    skip: optionalFunction("skip", options.skip),
  };
}

/**
 * The key header of a guarded request (`null`: none, yet required), else
 * `undefined`: a bare call-through (docs/architecture.md, No header no cost).
 */
export function guardedKey(
  config: Config,
  request: Request,
): string | null | undefined {
  // Any case (`patch` arrives as sent), but an unguarded standard method costs one lookup.
  const { methods, unguarded, skip } = config;
  const method = request.method;
  if (
    unguarded.has(method) ||
    (!methods.has(method) && !methods.has(method.toUpperCase()))
  ) {
    return undefined;
  }
  if (skip !== undefined && skip(request)) return undefined;
  const value = request.headers.get(config.header);
  return value === null && !config.required ? undefined : value;
}

/**
 * `render`, reporting a throw or a non-`Response` (a `render_error`) before
 * `reject()` falls back to the RFC 9457 problem.
 */
function reportingFailures(
  render: ProblemRenderer,
  report: Report,
): ProblemRenderer {
  return async (problem) => {
    const started = performance.now();
    try {
      const response = await render(problem);
      if (response instanceof Response) return response;
      throw new TypeError(
        `'renderProblem' must return a Response: it returned ${response}`,
      );
    } catch (error) {
      report(() => ({ type: "render_error", slot: null, error }), started);
      throw error;
    }
  };
}

type Scope = Exclude<IdempotencyOptions["scope"], "global">;

/** The `scope` option: a function, or `undefined` for `"global"`. */
function scopeOption(scope: unknown): Scope | undefined {
  if (scope === "global") return undefined;
  if (typeof scope === "function") return scope as Scope;
  throw new TypeError(
    `'scope' is required: pass (request) => the stable id of the user, tenant or API client the request acts for (resolved after authentication), or "global" for one key space shared by every caller: current value is ${
      typeof scope === "string" ? JSON.stringify(scope) : scope
    }`,
  );
}

/** What `new Request()` refuses, so `methods` cannot hold. */
const FORBIDDEN_METHODS = new Set(["CONNECT", "TRACE", "TRACK"]);

/** The standard methods, in the case `Request` normalizes them to. */
const STANDARD_METHODS =
  "CONNECT DELETE GET HEAD OPTIONS PATCH POST PUT QUERY TRACE".split(" ");
