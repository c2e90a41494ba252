// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Deadlines (src/_time.ts): the one timeout mechanism of every store, one
 * timer per store whatever the number of operations in flight.
 */
import assert from "node:assert/strict";
import { type DeadlineHandler, Deadlines } from "../src/_time.ts";

interface Seen {
  resolved: unknown[];
  failed: unknown[];
  expired: string[];
  late: [string, unknown, boolean][];
  retried: string[];
}

function handler(
  seen: Seen,
  retry?: (context: string, error: unknown) => PromiseLike<unknown> | undefined,
): DeadlineHandler<string> {
  return {
    resolved: (_context, value) => {
      seen.resolved.push(value);
      return value;
    },
    failed: (context, error) => {
      seen.failed.push(error);
      return new Error(`failed ${context}`, { cause: error });
    },
    expired: (context) => {
      seen.expired.push(context);
      return new Error(`expired ${context}`);
    },
    late: (context, value, failed) =>
      void seen.late.push([context, value, failed]),
    ...(retry === undefined ? {} : {
      retry: (context: string, error: unknown) => {
        seen.retried.push(context);
        return retry(context, error);
      },
    }),
  };
}

const fresh = (): Seen => ({
  resolved: [],
  failed: [],
  expired: [],
  late: [],
  retried: [],
});

/** Counts the timers set until `restore()`. */
function countTimers() {
  const realSetTimeout = globalThis.setTimeout;
  const counter = {
    count: 0,
    restore() {
      globalThis.setTimeout = realSetTimeout;
    },
  };
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    counter.count++;
    return realSetTimeout(...args);
  }) as typeof setTimeout;
  return counter;
}

/** A promise and the functions that settle it. */
function gate<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

Deno.test("Deadlines.withDeadline() answers what the work answers in time", async () => {
  const seen = fresh();
  const deadlines = new Deadlines(60_000, handler(seen));
  assert.equal(
    await deadlines.withDeadline((c) => Promise.resolve(`${c}!`), "a"),
    "a!",
  );
  await assert.rejects(
    deadlines.withDeadline(() => Promise.reject(new Error("boom")), "b"),
    /failed b/,
  );
  await assert.rejects(
    deadlines.withDeadline(() => {
      throw new Error("at once");
    }, "c"),
    /failed c/,
  );
  assert.deepEqual(seen.resolved, ["a!"]);
  assert.equal(seen.failed.length, 2);
  assert.deepEqual(seen.expired, []);
});

Deno.test("Deadlines.withDeadline() stops waiting at the deadline and hands the late outcome to the handler", async () => {
  const seen = fresh();
  const deadlines = new Deadlines(20, handler(seen));
  const work = gate<string>();
  await assert.rejects(
    deadlines.withDeadline(() => work.promise, "hung"),
    /expired hung/,
  );
  assert.deepEqual(seen.expired, ["hung"]);
  work.resolve("landed");
  await work.promise;
  await Promise.resolve();
  assert.deepEqual(seen.late, [["hung", "landed", false]]);
  assert.deepEqual(seen.resolved, []);
});

Deno.test("Deadlines serves any number of pending operations with one timer", async () => {
  const seen = fresh();
  const deadlines = new Deadlines(20, handler(seen));
  const timers = countTimers();
  try {
    const work = gate<string>();
    const calls = Array.from(
      { length: 100 },
      (_, i) => deadlines.withDeadline(() => work.promise, `op${i}`),
    );
    // Each one fails by its deadline, however many are pending.
    const results = await Promise.allSettled(calls);
    assert.ok(results.every((r) => r.status === "rejected"));
    assert.equal(seen.expired.length, 100);
    // One timer armed for the first; at most a re-arm per firing after it.
    assert.ok(timers.count < 10, `${timers.count} timers for 100 operations`);
  } finally {
    timers.restore();
  }
});

Deno.test("Deadlines retries in time with the handler's new work, never after the deadline", async () => {
  const seen = fresh();
  const deadlines = new Deadlines(
    60_000,
    handler(
      seen,
      (_c, error) =>
        (error as Error).message === "again"
          ? Promise.resolve("second")
          : undefined,
    ),
  );
  assert.equal(
    await deadlines.withDeadline(() => Promise.reject(new Error("again")), "r"),
    "second",
  );
  assert.deepEqual(seen.retried, ["r"]);

  const late = fresh();
  const short = new Deadlines(
    20,
    handler(late, () => Promise.resolve("never")),
  );
  const work = gate<string>();
  await assert.rejects(short.withDeadline(() => work.promise, "x"), /expired/);
  work.reject(new Error("again"));
  await work.promise.catch(() => {});
  await Promise.resolve();
  assert.deepEqual(late.retried, []);
  assert.equal(late.late.length, 1);
});

Deno.test("Deadlines with Infinity waits as long as the work takes, with no timer", async () => {
  const seen = fresh();
  const deadlines = new Deadlines(Infinity, handler(seen));
  const timers = countTimers();
  try {
    const work = gate<number>();
    const pending = deadlines.withDeadline(() => work.promise, "slow");
    work.resolve(7);
    assert.equal(await pending, 7);
    assert.equal(timers.count, 0);
  } finally {
    timers.restore();
  }
});

/**
 * Replaces the global timers with a queue on a hand-moved clock until
 * `restore()`: `advanceTo` fires, in order, each timer due on the way.
 */
function fakeGlobalTimers() {
  const real = {
    setTimeout: globalThis.setTimeout,
    clearTimeout: globalThis.clearTimeout,
  };
  let now = 0;
  const queue = new Set<{ at: number; fn: () => void }>();
  globalThis.setTimeout = ((fn: () => void, ms = 0) => {
    const timer = { at: now + ms, fn, ref() {}, unref() {} };
    queue.add(timer);
    return timer;
  }) as unknown as typeof setTimeout;
  globalThis.clearTimeout =
    ((timer: { at: number; fn: () => void }) =>
      void queue.delete(timer)) as unknown as typeof clearTimeout;
  return {
    clock: { now: () => now },
    set now(value: number) {
      now = value;
    },
    async advanceTo(target: number) {
      for (;;) {
        const due = [...queue].filter((t) => t.at <= target)
          .sort((a, b) => a.at - b.at)[0];
        if (due === undefined) break;
        queue.delete(due);
        now = due.at;
        due.fn();
        await Promise.resolve();
      }
      now = target;
    },
    restore() {
      globalThis.setTimeout = real.setTimeout;
      globalThis.clearTimeout = real.clearTimeout;
    },
  };
}

Deno.test("Deadlines fires a later operation's deadline at its own time, not a timeout after the earlier one's", async () => {
  const seen = fresh();
  const time = fakeGlobalTimers();
  try {
    const deadlines = new Deadlines(1_000, handler(seen), time.clock);
    const first = deadlines.withDeadline(() => gate<string>().promise, "a")
      .catch(() => "expired");
    time.now = 600;
    const second = deadlines.withDeadline(() => gate<string>().promise, "b")
      .catch(() => "expired");
    await time.advanceTo(1_000);
    assert.equal(await first, "expired");
    assert.deepEqual(seen.expired, ["a"]);
    await time.advanceTo(1_600); // b's deadline: 600 + 1000
    assert.deepEqual(seen.expired, ["a", "b"]);
    assert.equal(await second, "expired");
  } finally {
    time.restore();
  }
});

Deno.test("Deadlines expires exactly the operations still pending, in start order, whatever order the others settle in", async () => {
  // The pending list is unlinked anywhere (head, tail, middle, a lone entry)
  // while more operations start. Against a model: the settled ones resolve,
  // the rest expire in the order they started, and a settle after that is
  // late.
  const fc = (await import("fast-check")).default;
  // Each step starts an operation ("start", after a gap in ms) or settles
  // one still pending (its index among those, modulo their number). At most
  // 30 steps of at most 30 ms: no deadline (1 s) passes before the end.
  const step = fc.oneof(
    fc.record({ start: fc.integer({ min: 0, max: 30 }) }),
    fc.record({ settle: fc.nat() }),
  );
  await fc.assert(
    fc.asyncProperty(
      fc.array(step, { minLength: 1, maxLength: 30 }),
      async (steps) => {
        const seen = fresh();
        const time = fakeGlobalTimers();
        try {
          const deadlines = new Deadlines(1_000, handler(seen), time.clock);
          const gates: ReturnType<typeof gate<string>>[] = [];
          const outcomes: Promise<string>[] = [];
          const pending: number[] = []; // the model, in start order
          for (const s of steps) {
            if ("start" in s) {
              time.now = time.clock.now() + s.start;
              const i = gates.length;
              const g = gate<string>();
              gates.push(g);
              pending.push(i);
              outcomes.push(
                deadlines.withDeadline(() => g.promise, `op${i}`)
                  .then((v) => `value ${v}`, (e: Error) => e.message),
              );
            } else if (pending.length > 0) {
              const [i] = pending.splice(s.settle % pending.length, 1);
              gates[i!]!.resolve(`v${i}`);
              await gates[i!]!.promise;
              await Promise.resolve();
            }
          }
          const settled = new Set(
            [...gates.keys()].filter((i) => !pending.includes(i)),
          );
          await time.advanceTo(time.clock.now() + 1_000);
          assert.deepEqual(seen.expired, pending.map((i) => `op${i}`));
          assert.deepEqual(
            await Promise.all(outcomes),
            [...gates.keys()].map((i) =>
              settled.has(i) ? `value v${i}` : `expired op${i}`
            ),
          );
          for (const i of pending) gates[i]!.resolve(`late${i}`);
          await Promise.all(pending.map((i) => gates[i]!.promise));
          await Promise.resolve();
          assert.deepEqual(
            seen.late.map(([context]) => context).sort(),
            pending.map((i) => `op${i}`).sort(),
          );
          // Nothing is left to fire: a further minute expires nothing more.
          await time.advanceTo(time.clock.now() + 60_000);
          assert.equal(seen.expired.length, pending.length);
        } finally {
          time.restore();
        }
      },
    ),
    { numRuns: 300 },
  );
});
