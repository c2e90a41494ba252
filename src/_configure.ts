// Copyright 2026 the @idempotent/http authors. MIT license.
/** {@linkcode configure}: the middleware's options checked, defaults filled in. @module */

import { type Clock, SYSTEM_CLOCK } from "./_async.ts";
import { withLog } from "./_log.ts";
import { Sealer } from "./_seal.ts";
import {
  assertStore,
  headerName,
  headerNames,
  isMethodName,
  knownOptions,
  needsOption,
  nonNegativeInteger,
  nonNegativeMs,
  optionalBoolean,
  optionalFunction,
  positiveMs,
} from "./_validate.ts";
import { type Report, reporter } from "./events.ts";
import { hasherOf } from "./fingerprint.ts";
import { DEFAULTS, type IdempotencyOptions } from "./options.ts";
import type { ProblemRenderer } from "./problem.ts";
import type { IdempotencyStore } from "./store.ts";
import { MemoryStore } from "./stores/memory.ts";

/** Every option's name, for the misspelling check (the compiler keeps it whole). */
const OPTION_NAMES = Object.keys(
  {
    store: true,
    scope: true,
    header: true,
    key: true,
    methods: true,
    skip: true,
    required: true,
    ttl: true,
    lease: true,
    advertiseLifetime: true,
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

/**
 * Checks the options (`TypeError`, `RangeError`) and fills in their defaults;
 * `clock` is the one every timed step reads (a test passes a fake one).
 */
// deno-lint-ignore explicit-module-boundary-types -- its return type is `Config`
export function configure(
  options: IdempotencyOptions,
  clock: Clock = SYSTEM_CLOCK,
) {
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
  assertStore("store", store);
  const methods = options.methods ?? DEFAULTS.methods;
  const shown = () => JSON.stringify(methods);
  if (
    !Array.isArray(methods) || methods.length === 0 ||
    !methods.every(isMethodName)
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
  const ttl = lifetimeOption(options, "ttl");
  const lease = lifetimeOption(options, "lease");
  // Both numbers: checked once, the same for every request.
  const lifetime = typeof ttl === "number" && typeof lease === "number"
    ? lifetimeChecked(ttl, lease)
    : undefined;
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
  const onEvent = optionalFunction("onEvent", options.onEvent);
  const listener = withLog(onEvent, options.logger, store, clock);
  const render = optionalFunction("renderProblem", options.renderProblem);
  const required = option("required", optionalBoolean);
  const key = optionalFunction("key", options.key);
  return {
    store,
    scope: scopeOption(options.scope),
    header: option("header", headerName),
    key,
    methods: guarded, // Upper case.
    // The standard methods not in `methods`, as `Request` spells them.
    unguarded: new Set(STANDARD_METHODS.filter((m) => !guarded.has(m))),
    required,
    // Without the header, straight through: one field read (No header no cost).
    keyless: !required && key === undefined,
    ttl,
    lease,
    lifetime,
    maxRequestBytes: option("maxRequestBytes", nonNegativeInteger),
    maxResponseBytes: option("maxResponseBytes", nonNegativeInteger),
    cacheable: optionalFunction("cacheable", options.cacheable) ??
      ((response: Response) => response.ok),
    fingerprint: optionalFunction("fingerprint", options.fingerprint),
    hasher: hasherOf(options.secret), // Plain, or under `secret`.
    failOpen: option("failOpen", optionalBoolean),
    replayHeader: option("replayHeader", headerName),
    advertiseLifetime: option("advertiseLifetime", optionalBoolean),
    renderProblem: render &&
      reportingFailures(render, reporter(listener, clock), clock),
    encryption: Sealer.of(options.encryption),
    unstoredHeaders: option("storeSetCookie", optionalBoolean)
      ? unstored
      : new Set([...unstored, "set-cookie"]),
    onEvent: listener,
    completionWait,
    completionTimeout,
    maxPendingCompletions: option("maxPendingCompletions", nonNegativeInteger),
    clock,
    waitForInFlight,
    maxWaiting,
    skip: optionalFunction("skip", options.skip),
  };
}

/**
 * The key header of a guarded request (`null`: none, yet required or the
 * `key` option's to find), else
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
  return value === null && config.keyless ? undefined : value;
}

/**
 * `render`, reporting a throw or a non-`Response` (a `render_error`) before
 * `problemResponse()` falls back to the RFC 9457 problem.
 */
function reportingFailures(
  render: ProblemRenderer,
  report: Report,
  clock: Clock,
): ProblemRenderer {
  return async (problem) => {
    const started = clock.now();
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

/** A lifetime option: milliseconds, or a function checked per request (`lifetimeOf`). */
type Lifetime = number | ((request: Request) => number);

/** `ttl` or `lease`: checked now when a number, per request when a function. */
function lifetimeOption(
  options: IdempotencyOptions,
  name: "ttl" | "lease",
): Lifetime {
  const value = options[name] ?? DEFAULTS[name];
  return typeof value === "function" ? value : positiveMs(name, value);
}

/** Both lifetimes, or a `RangeError` when the lease is the longer. */
function lifetimeChecked(ttlMs: number, leaseMs: number) {
  if (leaseMs > ttlMs) {
    throw new RangeError(
      `'lease' must not exceed 'ttl' (${ttlMs}): current value is ${leaseMs}`,
    );
  }
  return { ttlMs, leaseMs };
}

/**
 * The request's `ttl` and `lease`, checked as the numbers are at
 * `configure()`, or the `error` of a function that threw or returned another value.
 */
export function lifetimeOf(
  config: Config,
  request: Request,
): { ttlMs: number; leaseMs: number } | { error: unknown } {
  const { ttl, lease, lifetime } = config;
  if (lifetime !== undefined) return lifetime;
  const of = (name: string, value: Lifetime) => {
    if (typeof value === "number") return value;
    let ms: unknown;
    try {
      ms = value(request);
    } catch (error) {
      throw new Error(`'${name}' threw`, { cause: error });
    }
    return positiveMs(name, ms);
  };
  try {
    return lifetimeChecked(of("ttl", ttl), of("lease", lease));
  } catch (error) {
    return { error };
  }
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
