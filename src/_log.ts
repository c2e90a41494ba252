// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's log: the events that mean something is misconfigured or
 * lost, and a FailoverStore's fallbacks and recoveries, written as one line
 * each to a {@linkcode Logger}, at most one line per kind a minute
 * (docs/architecture.md, Loud by default). @module
 */

import { type Clock, SYSTEM_CLOCK } from "./_async.ts";
import type { IdempotencyEvent } from "./events.ts";
import type { Logger } from "./options.ts";
import { messageOf } from "./_validate.ts";
import type { IdempotencyStore, StoreReport } from "./store.ts";
import { missingKey } from "./_seal.ts";

/** How long a kind's later lines are held back and counted, in milliseconds. */
const LOG_INTERVAL_MS = 60_000;

const PREFIX = "[@idempotent/http]";

/** One kind's minute: what was held back since its last line. */
interface Window {
  until: number;
  count: number;
  latest: string;
  cancel?: (() => void) | undefined;
}

type Listener = (event: IdempotencyEvent) => void;

/**
 * The `onEvent` listener and the `logger` option in one listener: `logger`
 * is `console` by default, with `onEvent` or without, nothing when `false`.
 * `onEvent` runs first; the log runs even if it throws. The store's reports
 * (a FailoverStore's fallbacks) go to the same logger through its
 * `subscribe()`, one listener per store and logger however many middlewares
 * share them.
 */
export function withLog(
  onEvent: Listener | undefined,
  logger: unknown,
  store: IdempotencyStore,
  clock?: Clock,
): Listener | undefined {
  if (logger === false) return onEvent;
  const to = (logger ?? globalThis.console) as Partial<Logger> | null;
  if (typeof to?.warn !== "function" || typeof to.error !== "function") {
    throw new TypeError(
      `'logger' must be false or an object with warn() and error(), such as console: current value is ${logger}`,
    );
  }
  if (typeof store.subscribe === "function") {
    store.subscribe(storeLog(store, to as Logger, clock));
  }
  const log = logListener(to as Logger, clock);
  if (onEvent === undefined) return log;
  return (event) => {
    try {
      onEvent(event);
    } finally {
      log(event);
    }
  };
}

/** Each store's log, by logger: the same function, so `subscribe()` adds it once. */
const storeLogs = new WeakMap<object, WeakMap<Logger, StoreListener>>();
type StoreListener = (event: StoreReport) => void;

/** The listener that writes a store's reports worth a line to `logger`. */
function storeLog(store: object, logger: Logger, clock?: Clock) {
  let logs = storeLogs.get(store);
  if (logs === undefined) storeLogs.set(store, logs = new WeakMap());
  let log = logs.get(logger);
  if (log === undefined) {
    const write = lineWriter(logger, clock);
    log = (event) => {
      const line = storeLineOf(event);
      if (line !== undefined) write(line);
    };
    logs.set(logger, log);
  }
  return log;
}

/**
 * An `onEvent` listener that writes the events worth a line to `logger`:
 * `store_error`, `fail_open`, `lease_lost`, a `completed` or `released`
 * given up (`outcome: "unknown"`) and an unreadable `conflict`. The first
 * of each kind is written at once; later ones within a minute are counted
 * and written as one line at the minute's end, with the latest's text.
 */
export function logListener(
  logger: Logger,
  clock?: Clock,
): (event: IdempotencyEvent) => void {
  const write = lineWriter(logger, clock);
  return (event) => {
    const line = lineOf(event);
    if (line !== undefined) write(line);
  };
}

/**
 * Writes lines of `kind: text` to `logger`, at its level for the kind, each
 * kind at most once a minute: the rest counted, as one line at its end.
 */
function lineWriter(
  logger: Logger,
  clock: Clock = SYSTEM_CLOCK,
): (text: string) => void {
  const windows = new Map<string, Window>();
  // The minute's held-back count, as one line; the next minute starts.
  const flush = (kind: string, level: Level, window: Window) => {
    window.cancel = undefined;
    const times = window.count === 1 ? "once more" : `${window.count} times`;
    writeAt(
      logger,
      level,
      `${PREFIX} ${kind} happened ${times} in the last minute; the latest: ${window.latest}`,
    );
    window.count = 0;
    window.until = clock.now() + LOG_INTERVAL_MS;
  };
  return (text) => {
    const kind = text.slice(0, text.indexOf(":"));
    const level = LEVELS.get(kind) ?? "error";
    const now = clock.now();
    const window = windows.get(kind);
    if (window === undefined || (now >= window.until && window.count === 0)) {
      writeAt(logger, level, `${PREFIX} ${text}`);
      const until = now + LOG_INTERVAL_MS;
      windows.set(kind, { until, count: 0, latest: text });
      return;
    }
    window.count++;
    window.latest = text;
    if (now >= window.until) {
      window.cancel?.();
      flush(kind, level, window);
    } else {
      window.cancel ??= clock.setTimeout(
        () => flush(kind, level, window),
        window.until - now,
      );
    }
  };
}

type Level = "info" | "warn" | "error";

/** `info` where the logger has it, else `warn`. */
function writeAt(logger: Logger, level: Level, line: string): void {
  if (level !== "info") return logger[level](line);
  if (typeof logger.info === "function") logger.info(line);
  else logger.warn(line);
}

/** The kinds whose lines are not errors, and their level. */
const LEVELS = new Map<string, Level>([
  ..."fail_open lease_lost unreadable fallback fallback_unavailable write_failed"
    .split(" ").map((kind) => [kind, "warn"] as const),
  ["recovered", "info"],
]);

/** The event's line (its kind, a colon, what it means), if it is logged. */
function lineOf(event: IdempotencyEvent): string | undefined {
  switch (event.type) {
    case "store_error":
      return `store_error: the store's ${event.operation} failed${
        event.operation === "claim"
          ? " (its request answered 503, or ran unguarded under 'failOpen')"
          : ""
      }: ${describe(event.error)}`;
    case "fail_open":
      return `fail_open: the store failed, so 'failOpen' ran the handler unguarded (a retry may run it again): ${
        describe(event.error)
      }`;
    case "lease_lost":
      return `lease_lost: a handler still running lost its key (slot ${event.slot}) to another request or an operator's forget, so it may run twice: raise 'lease' above the slowest handler, or look at the store's latency`;
    case "completed":
    case "released":
      if (event.outcome !== "unknown") return undefined;
      return `write_given_up: a record's ${
        event.type === "completed" ? "completion" : "release"
      } was given up after ${event.attempts} attempts ('completionTimeout'): ${
        event.type === "completed"
          ? "a retry of that key may run the handler again"
          : "the key stays in flight until its lease passes"
      }; see the store_error lines for why`;
    case "option_error":
      return `option_error: a request answered 500 without running its handler, since an option's function failed for it: ${
        describe(event.error)
      }`;
    case "render_error":
      return `render_error: 'renderProblem' failed, so the RFC 9457 problem was sent: ${
        describe(event.error)
      }`;
    case "conflict":
      if (!event.unreadable) return undefined;
      return `unreadable: a key's record could not be read, so it answers 500 and never runs the handler: ${
        event.reason ??
          "another program writes under the store's prefix, or the record was sealed with a key no longer in 'encryption.keys'"
      }; ${
        event.keyId !== undefined && event.reason === missingKey(event.keyId)
          ? `list key id ${
            JSON.stringify(event.keyId)
          } in 'encryption.keys' again (after the sealing key) and it replays: forgetting it would run its handler again; `
          : ""
      }${staysUntil(event.slot, event.expiresAt)}`;
    default:
      return undefined;
  }
}

/**
 * A store's report's line, if it is logged: a FailoverStore's `fallback`,
 * `fallback_unavailable`, `write_failed` and `recovered`. Neither `diverged`
 * (expected once a primary restarted empty; `recovered` follows) nor an
 * `undo` (the end of a clean-up after a `store_error` already logged).
 */
function storeLineOf(event: StoreReport): string | undefined {
  switch (event.type) {
    case "fallback":
      return `fallback: the FailoverStore's primary store failed a claim, so claims go to the fallback store alone while it fails (requests are still served): ${
        describe(event.error)
      }`;
    case "fallback_unavailable":
      return `fallback_unavailable: the FailoverStore's fallback store failed a claim, so ${
        event.refused
          ? "the request was refused (503): the fallback has never answered (run 'await store.migrate()' at boot: a missing table fails so)"
          : "a key was claimed on the primary alone (a primary that restarts empty may run it again)"
      }: ${describe(event.error)}`;
    case "write_failed":
      return `write_failed: the FailoverStore's ${event.store} store failed a ${event.operation}, so the other store's answer stands and the two differ on that key until it expires: ${
        describe(event.error)
      }`;
    case "recovered":
      return `recovered: the FailoverStore's primary store answers again, and a key it did not hold was answered from the fallback's record (${
        event.copied ? "copied into the primary" : "not copied"
      })`;
    default:
      return undefined;
  }
}

/** How long an unreadable value stays, and the command that forgets it. */
function staysUntil(slot: string | null, expiresAt?: number | null): string {
  const forget =
    `idem forget STORE --slot ${slot} --yes (STORE: the app's store as --help lists them, --redis URL to --sqlite PATH, both of a FailoverStore, with its --prefix or --table)`;
  if (expiresAt === null) {
    return `the store reports no expiry for it (Redis: no TTL), so it may stay for ever: ${forget}`;
  }
  const at = expiresAt === undefined
    ? ""
    : ` at ${new Date(expiresAt).toISOString()}`;
  return `it stays until it expires${at}, or until forgotten: ${forget}`;
}

/** An error as `Name: message`, then each cause whose message it lacks. */
function describe(error: unknown): string {
  let text = nameAndMessage(error);
  const seen = new Set<unknown>([error]);
  let cause = (error as { cause?: unknown } | null)?.cause;
  while (cause !== undefined && !seen.has(cause)) {
    seen.add(cause);
    const message = messageOf(cause);
    if (!text.includes(message)) text += ` (cause: ${nameAndMessage(cause)})`;
    cause = (cause as { cause?: unknown } | null)?.cause;
  }
  return text;
}

function nameAndMessage(error: unknown): string {
  const name = (error as { name?: unknown } | null)?.name;
  const message = messageOf(error);
  return typeof name === "string" && name ? `${name}: ${message}` : message;
}
