// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's options: their defaults (one table, shared with the Hono
 * adapter) and {@linkcode configure}, which checks them eagerly and resolves
 * them into the {@linkcode Config} a guard runs on.
 *
 * @module
 */

import { HEARTBEAT_CLOCK, type HeartbeatClock } from "./_lease.ts";
import {
  headerName,
  headerNames,
  nonNegativeInteger,
  optionalBoolean,
  optionalFunction,
  positiveInteger,
} from "./_validate.ts";
import type { IdempotencyEvent } from "./events.ts";
import type { IdempotencyOptions } from "./idempotency.ts";
import type { IdempotencyStore } from "./store.ts";
import { MemoryStore } from "./stores/memory.ts";

/** The default of every option that has a value for a default. */
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
  replayHeader: "Idempotent-Replayed",
  completionWait: 1_000,
  completionTimeout: 300_000,
  maxPendingCompletions: 100,
  waitForInFlight: 0,
  maxWaiting: 1_000,
});

/** The options, checked, with their defaults filled in. */
export interface Config {
  store: IdempotencyStore;
  scope: ((request: Request) => string | Promise<string>) | undefined;
  /** Lower case. */
  header: string;
  /** Upper case. */
  methods: Set<string>;
  required: boolean;
  ttl: number;
  lease: number;
  maxRequestBytes: number;
  maxResponseBytes: number;
  cacheable: (response: Response) => boolean;
  fingerprint:
    | ((request: Request, body: Uint8Array) => string | Promise<string>)
    | undefined;
  failOpen: boolean;
  /** Lower case. */
  replayHeader: string;
  /** Lower case. */
  unstoredHeaders: ReadonlySet<string>;
  onEvent: ((event: IdempotencyEvent) => void) | undefined;
  completionWait: number;
  completionTimeout: number;
  maxPendingCompletions: number;
  /** The heartbeat's time: the system's unless a test set `[HEARTBEAT_CLOCK]`. */
  heartbeatClock: HeartbeatClock | undefined;
  /** 0: answer 409 at once. */
  waitForInFlight: number;
  maxWaiting: number;
  skip: ((request: Request) => boolean) | undefined;
}

/**
 * Checks the options and fills in their defaults.
 *
 * @param options What the caller passed.
 * @returns The configuration.
 * @throws {TypeError} When an option has the wrong type.
 * @throws {RangeError} When a number option is out of range, or `lease`
 * exceeds `ttl`, or `completionWait` exceeds `completionTimeout`.
 */
export function configure(options: IdempotencyOptions): Config {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `'options' must be an object: current value is ${options}`,
    );
  }
  const store = options.store ?? new MemoryStore();
  for (const method of ["claim", "complete", "release", "extend"] as const) {
    if (typeof store?.[method] !== "function") {
      throw new TypeError(
        `'store' must implement IdempotencyStore: '${method}' is not a function`,
      );
    }
  }
  const methods = options.methods ?? DEFAULTS.methods;
  if (
    !Array.isArray(methods) || methods.length === 0 ||
    !methods.every((m) => typeof m === "string" && /^[A-Za-z]+$/.test(m))
  ) {
    throw new TypeError(
      `'methods' must be a non-empty list of method names: current value is ${
        JSON.stringify(methods)
      }`,
    );
  }
  const forbidden = methods.find((m) => FORBIDDEN_METHODS.has(m.toUpperCase()));
  if (forbidden !== undefined) {
    throw new TypeError(
      `'methods' cannot guard ${forbidden}: \`new Request()\` refuses that method, so its handler could never be given the request: current value is ${
        JSON.stringify(methods)
      }`,
    );
  }
  const ttl = numberOption(options, "ttl", positiveInteger);
  const lease = numberOption(options, "lease", positiveInteger);
  if (lease > ttl) {
    throw new RangeError(
      `'lease' must not exceed 'ttl' (${ttl}): current value is ${lease}`,
    );
  }
  const completionWait = numberOption(
    options,
    "completionWait",
    nonNegativeInteger,
  );
  const completionTimeout = numberOption(
    options,
    "completionTimeout",
    positiveInteger,
  );
  if (completionWait > completionTimeout) {
    throw new RangeError(
      `'completionWait' must not exceed 'completionTimeout' (${completionTimeout}): current value is ${completionWait}`,
    );
  }
  return {
    store,
    scope: optionalFunction("scope", options.scope),
    header: headerName("header", options.header ?? DEFAULTS.header),
    methods: new Set(methods.map((m) => m.toUpperCase())),
    required: optionalBoolean(
      "required",
      options.required ?? DEFAULTS.required,
    ),
    ttl,
    lease,
    maxRequestBytes: numberOption(
      options,
      "maxRequestBytes",
      nonNegativeInteger,
    ),
    maxResponseBytes: numberOption(
      options,
      "maxResponseBytes",
      nonNegativeInteger,
    ),
    cacheable: optionalFunction("cacheable", options.cacheable) ?? isSuccess,
    fingerprint: optionalFunction("fingerprint", options.fingerprint),
    failOpen: optionalBoolean(
      "failOpen",
      options.failOpen ?? DEFAULTS.failOpen,
    ),
    replayHeader: headerName(
      "replayHeader",
      options.replayHeader ?? DEFAULTS.replayHeader,
    ),
    unstoredHeaders: headerNames(
      "unstoredHeaders",
      options.unstoredHeaders ?? DEFAULTS.unstoredHeaders,
    ),
    onEvent: optionalFunction("onEvent", options.onEvent),
    completionWait,
    completionTimeout,
    maxPendingCompletions: numberOption(
      options,
      "maxPendingCompletions",
      nonNegativeInteger,
    ),
    heartbeatClock: (options as { [HEARTBEAT_CLOCK]?: HeartbeatClock })[
      HEARTBEAT_CLOCK
    ],
    waitForInFlight: numberOption(
      options,
      "waitForInFlight",
      nonNegativeInteger,
    ),
    maxWaiting: numberOption(options, "maxWaiting", nonNegativeInteger),
    skip: optionalFunction("skip", options.skip),
  };
}

/** The options whose value is a number. */
type NumberOption =
  | "ttl"
  | "lease"
  | "maxRequestBytes"
  | "maxResponseBytes"
  | "completionWait"
  | "completionTimeout"
  | "maxPendingCompletions"
  | "waitForInFlight"
  | "maxWaiting";

/** A number option, or its default, as `check` lets it through. */
function numberOption(
  options: IdempotencyOptions,
  name: NumberOption,
  check: (name: string, value: unknown) => number,
): number {
  return check(name, options[name] ?? DEFAULTS[name]);
}

/**
 * Methods the Fetch standard forbids in `new Request()`: a guarded request
 * is rebuilt for its handler after its claim, so one of these would be
 * claimed and then fail (a 500, the key held for a lease).
 */
const FORBIDDEN_METHODS = new Set(["CONNECT", "TRACE", "TRACK"]);

/** The default of `cacheable`: a 2xx. */
function isSuccess(response: Response): boolean {
  return response.ok;
}
