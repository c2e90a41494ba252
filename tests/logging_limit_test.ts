// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The log's rate limit (`src/_log.ts`) at its documented minute, n−1 / n /
 * n+1 on a fake clock, and the level of every kind of line, the middleware's
 * and a store's, its counted line included. The first file is
 * tests/logging_test.ts; a FailoverStore's lines are in
 * tests/logging_store_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { IdempotencyEvent } from "../src/events.ts";
import { logListener, withLog } from "../src/_log.ts";
import type { Logger } from "../src/options.ts";
import { MemoryStore } from "../mod.ts";
import type { StoreReport } from "../src/store.ts";
import { FakeClock } from "./_support/time.ts";

/** The log's documented minute. */
const LOG_INTERVAL_MS = 60_000;

type Level = "info" | "warn" | "error";

/** A logger that keeps each line with its level and the clock's time. */
function recorder(clock: FakeClock, withInfo = true) {
  const lines: { level: Level; at: number; line: string }[] = [];
  const at = (level: Level) => (line: string) =>
    void lines.push({ level, at: clock.now(), line });
  const logger: Logger = { warn: at("warn"), error: at("error") };
  if (withInfo) logger.info = at("info");
  return { lines, logger };
}

const lost: IdempotencyEvent = { type: "lease_lost", slot: "s", elapsedMs: 0 };

/** No settling between timers: the log's own timer writes synchronously. */
const none = () => Promise.resolve();

Deno.test("logListener(): a kind's second line, with nothing held back, is written at once from exactly one minute after the first", async () => {
  for (
    const [gap, atOnce] of [[LOG_INTERVAL_MS - 1, false], [
      LOG_INTERVAL_MS,
      true,
    ], [LOG_INTERVAL_MS + 1, true]] as const
  ) {
    const clock = new FakeClock();
    const { lines, logger } = recorder(clock);
    const log = logListener(logger, clock);
    const start = clock.now();
    log(lost);
    await clock.advance(gap, none);
    log(lost);
    if (atOnce) {
      assert.equal(lines.length, 2, `after ${gap} ms`);
      assert.equal(lines[1]!.at, start + gap);
      assert.doesNotMatch(lines[1]!.line, /happened/, `after ${gap} ms`);
      assert.equal(clock.pending, 0, "no timer for a line written at once");
    } else {
      assert.equal(lines.length, 1, `held back after ${gap} ms`);
      await clock.advance(0, none);
      assert.equal(lines.length, 1, "still held");
      await clock.advance(1, none);
      assert.equal(lines.length, 2, "written at the minute's end");
      assert.equal(lines[1]!.at, start + LOG_INTERVAL_MS);
      assert.match(
        lines[1]!.line,
        /^\[@idempotent\/http\] lease_lost happened once more in the last minute; the latest: lease_lost: /,
      );
    }
  }
});

Deno.test("logListener(): after a counted line the next minute starts; two held back are '2 times'", async () => {
  const clock = new FakeClock();
  const { lines, logger } = recorder(clock);
  const log = logListener(logger, clock);
  const start = clock.now();
  log(lost);
  await clock.advance(10, none);
  log(lost);
  log(lost);
  await clock.advance(LOG_INTERVAL_MS - 10, none);
  assert.equal(lines.length, 2);
  assert.match(
    lines[1]!.line,
    /lease_lost happened 2 times in the last minute/,
  );
  const flushed = start + LOG_INTERVAL_MS;
  assert.equal(lines[1]!.at, flushed);
  // A minute from the counted line: held at n−1, at once at n.
  await clock.advance(LOG_INTERVAL_MS - 1, none);
  log(lost);
  assert.equal(lines.length, 2, "held: the counted line started a minute");
  await clock.advance(1, none);
  assert.equal(lines.length, 3);
  assert.equal(lines[2]!.at, flushed + LOG_INTERVAL_MS);
  assert.match(lines[2]!.line, /happened once more/);
  // Kinds are limited apart: another kind's first line goes at once.
  log({ type: "lease_lost", slot: "t", elapsedMs: 0 });
  log({
    type: "store_error",
    slot: "s",
    elapsedMs: 0,
    operation: "claim",
    error: new Error("down"),
  });
  assert.equal(lines.length, 4);
  assert.match(lines[3]!.line, /^\[@idempotent\/http\] store_error: /);
});

const write = {
  stored: "full",
  bytes: 1,
  attempts: 3,
  background: true,
} as const;
const base = { slot: "s", elapsedMs: 0 } as const;

/** Each logged kind of the middleware's, with an event of it and its level. */
const EVENTS: [kind: string, event: IdempotencyEvent, level: Level][] = [
  ["store_error", {
    ...base,
    type: "store_error",
    operation: "complete",
    error: new Error("x"),
  }, "error"],
  ["fail_open", { ...base, type: "fail_open", error: new Error("x") }, "warn"],
  ["lease_lost", { ...base, type: "lease_lost" }, "warn"],
  ["write_given_up", {
    ...base,
    type: "completed",
    ...write,
    outcome: "unknown",
  }, "error"],
  ["render_error", {
    slot: null,
    elapsedMs: 0,
    type: "render_error",
    error: new Error("x"),
  }, "error"],
  ["unreadable", {
    ...base,
    type: "conflict",
    retryAfterMs: 0,
    unreadable: true,
  }, "warn"],
];

/** Each logged kind of a store's report, with its level. */
const REPORTS: [kind: string, event: StoreReport, level: Level][] = [
  ["fallback", {
    type: "fallback",
    operation: "claim",
    slot: "s",
    error: new Error("x"),
  }, "warn"],
  ["fallback_unavailable", {
    type: "fallback_unavailable",
    operation: "claim",
    slot: "s",
    error: new Error("x"),
  }, "warn"],
  ["write_failed", {
    type: "write_failed",
    store: "primary",
    operation: "complete",
    slot: "s",
    error: new Error("x"),
  }, "warn"],
  ["recovered", { type: "recovered", slot: "s", copied: false }, "info"],
];

/** A store that hands its listeners to the test. */
function reporting(): { store: MemoryStore; tell: (e: StoreReport) => void } {
  const listeners: ((e: StoreReport) => void)[] = [];
  const store = new MemoryStore();
  Object.assign(store, {
    subscribe: (listener: (e: StoreReport) => void) => listeners.push(listener),
  });
  return { store, tell: (e) => listeners.forEach((l) => l(e)) };
}

Deno.test("the log writes each kind at its level, and its counted line at the same level", async () => {
  for (const withInfo of [true, false]) {
    const clock = new FakeClock();
    const { lines, logger } = recorder(clock, withInfo);
    const { store, tell } = reporting();
    const log = withLog(undefined, logger, store, clock)!;
    const all = [
      ...EVENTS.map(([kind, event, level]) =>
        [kind, () => log(event), level] as const
      ),
      ...REPORTS.map(([kind, event, level]) =>
        [kind, () => tell(event), level] as const
      ),
    ];
    for (const [kind, fire, level] of all) {
      const expected = level === "info" && !withInfo ? "warn" : level;
      lines.length = 0;
      fire();
      fire();
      await clock.advance(LOG_INTERVAL_MS, none);
      assert.deepEqual(
        lines.map((l) =>
          `${l.level} ${l.line.slice(19, 19 + kind.length + 1)}`
        ),
        [`${expected} ${kind}:`, `${expected} ${kind} `],
        `${kind} (info: ${withInfo})`,
      );
    }
    // Not logged: the events of a working store, a store's diverged and undo.
    lines.length = 0;
    log({ ...base, type: "claimed", recovered: false });
    log({ ...base, type: "completed", ...write, outcome: "lost" });
    log({
      ...base,
      type: "released",
      reason: "thrown",
      outcome: "applied",
      attempts: 1,
    });
    log({ ...base, type: "conflict", retryAfterMs: 1, unreadable: false });
    tell({ type: "undo", slot: "s", outcome: "applied" });
    tell({
      type: "diverged",
      operation: "complete",
      slot: "s",
      primary: "applied",
      fallback: "lost",
    });
    assert.deepEqual(lines, []);
  }
});
