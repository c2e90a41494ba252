// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's log: the events that mean something is misconfigured or
 * lost, written as one line each to a {@linkcode Logger}, at most one line
 * per kind a minute (docs/architecture.md, Loud by default). @module
 */

import { type Clock, SYSTEM_CLOCK } from "./_async.ts";
import type { IdempotencyEvent } from "./events.ts";
import type { Logger } from "./options.ts";

/** A test's clock for the log's minute: `{ [LOG_CLOCK]: clock }` in the options. */
export const LOG_CLOCK: unique symbol = Symbol("log clock");

/** How long a kind's later lines are held back and counted, in milliseconds. */
export const LOG_INTERVAL_MS = 60_000;

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
 * The `onEvent` listener and the `logger` option in one listener, or
 * `undefined` when neither is wanted: `logger` is `console` by default
 * without `onEvent`, nothing by default beside one, nothing when `false`.
 * `onEvent` runs first; the log runs even if it throws.
 */
export function withLog(
  onEvent: Listener | undefined,
  logger: unknown,
  clock?: Clock,
): Listener | undefined {
  if (logger === false || (logger === undefined && onEvent !== undefined)) {
    return onEvent;
  }
  const to = (logger ?? globalThis.console) as Partial<Logger> | null;
  if (typeof to?.warn !== "function" || typeof to.error !== "function") {
    throw new TypeError(
      `'logger' must be false or an object with warn() and error(), such as console: current value is ${logger}`,
    );
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

/**
 * An `onEvent` listener that writes the events worth a line to `logger`:
 * `store_error`, `fail_open`, `lease_lost`, a `completed` or `released`
 * given up (`outcome: "unknown"`) and an unreadable `conflict`. The first
 * of each kind is written at once; later ones within a minute are counted
 * and written as one line at the minute's end, with the latest's text.
 */
export function logListener(
  logger: Logger,
  clock: Clock = SYSTEM_CLOCK,
): (event: IdempotencyEvent) => void {
  const windows = new Map<string, Window>();
  // The minute's held-back count, as one line; the next minute starts.
  const flush = (kind: string, level: "warn" | "error", window: Window) => {
    window.cancel = undefined;
    const times = window.count === 1 ? "once more" : `${window.count} times`;
    logger[level](
      `${PREFIX} ${kind} happened ${times} in the last minute; the latest: ${window.latest}`,
    );
    window.count = 0;
    window.until = clock.now() + LOG_INTERVAL_MS;
  };
  const write = (text: string) => {
    const kind = text.slice(0, text.indexOf(":"));
    const level = WARNINGS.has(kind) ? "warn" : "error";
    const now = clock.now();
    const window = windows.get(kind);
    if (window === undefined || (now >= window.until && window.count === 0)) {
      logger[level](`${PREFIX} ${text}`);
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
  return (event) => {
    const line = lineOf(event);
    if (line !== undefined) write(line);
  };
}

/** The kinds whose lines are warnings; the others' are errors. */
const WARNINGS = new Set(["fail_open", "lease_lost", "unreadable"]);

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
      return "lease_lost: a handler still running lost its key to another request (it may run twice): raise 'lease' above the slowest handler, or look at the store's latency";
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
    case "render_error":
      return `render_error: 'renderProblem' failed, so the RFC 9457 problem was sent: ${
        describe(event.error)
      }`;
    case "conflict":
      if (!event.unreadable) return undefined;
      return `unreadable: a key's record could not be read, so it answers 500 and never runs the handler: another program writes under the store's prefix, or the record was sealed with a key no longer in 'encryption.keys'; ${
        staysUntil(event.slot, event.expiresAt)
      }`;
    default:
      return undefined;
  }
}

/** How long an unreadable value stays, and the command that forgets it. */
function staysUntil(slot: string | null, expiresAt?: number | null): string {
  const forget =
    `idem forget STORE --slot ${slot} --yes (STORE: --redis URL, --postgres URL or --kv PATH, with the store's --prefix or --table)`;
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

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : String(error);
}
