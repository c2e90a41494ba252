// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * StoreCalls (src/stores/_store_call.ts): the one timeout mechanism of every
 * store, one timer per store whatever the number of calls in flight.
 */
import assert from "node:assert/strict";
import { StoreCalls, type Undo } from "../../src/stores/_store_call.ts";
import { Orphans } from "../../src/stores/_orphans.ts";
import { StoreError, type StoreOperation } from "../../src/store.ts";

interface Seen {
  /** Each time the service answered in time (Orphans told). */
  answered: number;
  failed: unknown[];
  expired: string[];
  /** What came back after the deadline: [slot, value, failed]. */
  late: [string, unknown, boolean][];
  /** Each late call handed back to Orphans, by slot. */
  cameBack: string[];
  retried: string[];
}

const fresh = (): Seen => ({
  answered: 0,
  failed: [],
  expired: [],
  late: [],
  cameBack: [],
  retried: [],
});

/** StoreCalls whose errors, Orphans and late values report to `seen`. */
function calls(
  seen: Seen,
  ms: number,
  clock?: { now(): number },
): StoreCalls {
  const orphans = new (class extends Orphans {
    override serviceAnswered() {
      seen.answered++;
    }
    override cameBack(
      orphan: Parameters<Orphans["cameBack"]>[0],
      token: string | undefined,
    ) {
      seen.cameBack.push(orphan.slot);
      super.cameBack(orphan, token);
    }
  })(() => Promise.resolve("lost"));
  return new StoreCalls(ms, orphans, {
    failed: (operation: StoreOperation, error) => {
      seen.failed.push(error);
      return new StoreError(`failed ${operation}`, { operation, cause: error });
    },
    timedOut: (operation) => {
      seen.expired.push(operation);
      return new StoreError(`expired ${operation}`, { operation });
    },
  }, clock);
}

/**
 * A claim's undo that records the late value: `context` goes as the
 * operation (what the errors name) and as the slot (what Orphans sees).
 */
function undo<T>(seen: Seen, context: string): Undo<T> {
  return {
    slot: context,
    leaseMs: 1_000,
    token: `token-${context}`,
    acquired: (value) => void seen.late.push([context, value, false]),
    mayHaveRun: (error) => (seen.late.push([context, error, true]), false),
  };
}

/** Runs `work` as `context`, named as the operation its errors give. */
function run<T>(
  store: StoreCalls,
  seen: Seen,
  work: () => PromiseLike<T>,
  context: string,
): Promise<T> {
  return store.run(context as StoreOperation, work, undo(seen, context));
}

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

Deno.test("StoreCalls.run() answers what the work answers in time", async () => {
  const seen = fresh();
  const store = calls(seen, 60_000);
  assert.equal(
    await run(store, seen, () => Promise.resolve(`a!`), "a"),
    "a!",
  );
  await assert.rejects(
    run(store, seen, () => Promise.reject(new Error("boom")), "b"),
    /failed b/,
  );
  await assert.rejects(
    run(store, seen, () => {
      throw new Error("at once");
    }, "c"),
    /failed c/,
  );
  assert.equal(seen.answered, 1);
  assert.equal(seen.failed.length, 2);
  assert.deepEqual(seen.expired, []);
});

Deno.test("StoreCalls.run() stops waiting at the deadline and hands the late outcome to the undo", async () => {
  const seen = fresh();
  const store = calls(seen, 20);
  const work = gate<string>();
  await assert.rejects(
    run(store, seen, () => work.promise, "hung"),
    /expired hung/,
  );
  assert.deepEqual(seen.expired, ["hung"]);
  work.resolve("landed");
  await work.promise;
  await Promise.resolve();
  assert.deepEqual(seen.late, [["hung", "landed", false]]);
  assert.equal(seen.answered, 0);
});

Deno.test("StoreCalls serves any number of pending calls with one timer", async () => {
  const seen = fresh();
  const store = calls(seen, 20);
  const timers = countTimers();
  try {
    const work = gate<string>();
    const pending = Array.from(
      { length: 100 },
      (_, i) => run(store, seen, () => work.promise, `op${i}`),
    );
    // Each one fails by its deadline, however many are pending.
    const results = await Promise.allSettled(pending);
    assert.ok(results.every((r) => r.status === "rejected"));
    assert.equal(seen.expired.length, 100);
    // One timer armed for the first; at most a re-arm per firing after it.
    assert.ok(timers.count < 10, `${timers.count} timers for 100 calls`);
  } finally {
    timers.restore();
  }
});

/** Work of two steps: the second when the first fails with "again". */
function twoSteps(seen: Seen, context: string, first: () => Promise<string>) {
  return (call: { throwIfExpired(): void }) =>
    first().catch((error: Error) => {
      if (error.message !== "again") throw error;
      call.throwIfExpired();
      seen.retried.push(context);
      return "second";
    });
}

Deno.test("StoreCalls runs a work's next step in time, never after the deadline", async () => {
  const seen = fresh();
  const store = calls(seen, 60_000);
  assert.equal(
    await store.run(
      "claim",
      twoSteps(seen, "r", () => Promise.reject(new Error("again"))),
    ),
    "second",
  );
  assert.deepEqual(seen.retried, ["r"]);

  const late = fresh();
  const short = calls(late, 20);
  const work = gate<string>();
  await assert.rejects(
    short.run(
      "claim",
      twoSteps(late, "x", () => work.promise),
      undo(late, "x"),
    ),
    /expired/,
  );
  work.reject(new Error("again"));
  await work.promise.catch(() => {});
  await Promise.resolve();
  await Promise.resolve();
  assert.deepEqual(late.retried, []);
  assert.equal(late.cameBack.length, 1);
});

Deno.test("StoreCalls with Infinity waits as long as the work takes, with no timer", async () => {
  const seen = fresh();
  const store = calls(seen, Infinity);
  const timers = countTimers();
  try {
    const work = gate<number>();
    const pending = run(store, seen, () => work.promise, "slow");
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
    /** The real `setTimeout`, to wait for a turn of the event loop. */
    real: real.setTimeout,
    /** The timers not yet fired. */
    get pending() {
      return [...queue];
    },
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

Deno.test("StoreCalls fires a later call's deadline at its own time, not a timeout after the earlier one's", async () => {
  const seen = fresh();
  const time = fakeGlobalTimers();
  try {
    const store = calls(seen, 1_000, time.clock);
    const first = run(store, seen, () => gate<string>().promise, "a")
      .catch(() => "expired");
    time.now = 600;
    const second = run(store, seen, () => gate<string>().promise, "b")
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

Deno.test("StoreCalls expires exactly the calls still pending, in start order, whatever order the others settle in", async () => {
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
          const store = calls(seen, 1_000, time.clock);
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
                run(store, seen, () => g.promise, `op${i}`)
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

// --- documented numbers at their boundaries ----------------------------------

Deno.test("StoreCalls gives a call exactly timeoutMs: an answer a millisecond before is the answer, at it an error", async () => {
  const seen = fresh();
  const time = fakeGlobalTimers();
  try {
    const store = calls(seen, 1_000, time.clock);
    const answered = gate<string>();
    const a = run(store, seen, () => answered.promise, "a");
    const b = run(store, seen, () => gate<string>().promise, "b")
      .catch((e: Error) => e.message);
    await time.advanceTo(999);
    answered.resolve("in time");
    assert.equal(await a, "in time");
    assert.deepEqual(seen.expired, []);
    await time.advanceTo(1_000);
    assert.equal(await b, "expired b");
    // c starts at 1,000, d at 1,500 while c is pending: d's deadline is its own.
    const c = run(store, seen, () => gate<string>().promise, "c")
      .catch((e: Error) => e.message);
    time.now = 1_500;
    const d = run(store, seen, () => gate<string>().promise, "d")
      .catch((e: Error) => e.message);
    await time.advanceTo(2_000);
    assert.equal(await c, "expired c");
    await time.advanceTo(2_499);
    assert.deepEqual(seen.expired, ["b", "c"]);
    await time.advanceTo(2_500);
    assert.equal(await d, "expired d");
  } finally {
    time.restore();
  }
});

/** Waits until `done()`, a turn of the real event loop at a time. */
async function turnsUntil(done: () => boolean, realTimeout: typeof setTimeout) {
  for (let turn = 0; !done(); turn++) {
    assert.ok(turn < 1_000, "never happened");
    await new Promise((resolve) => realTimeout(resolve, 0));
  }
}

Deno.test("Orphans keeps max orphans: the one past it drops the oldest, ready ones before watched ones", async () => {
  const released: string[] = [];
  let failing = true;
  const orphans = new Orphans((_slot, token) => {
    released.push(token);
    return failing
      ? Promise.reject(new Error("down"))
      : Promise.resolve("applied");
  }, 3);
  const time = fakeGlobalTimers();
  try {
    orphans.undo("s", "t1", 60_000); // ready, its release failing
    await turnsUntil(() => time.pending.length === 1, time.real); // its retry
    await new Promise((resolve) => time.real(resolve, 0)); // the pass ended
    const w2 = orphans.watch("s", "t2", 60_000);
    assert.equal(orphans.size, 2); // max − 1
    const w3 = orphans.watch("s", "t3", 60_000);
    assert.equal(orphans.size, 3); // max
    const w4 = orphans.watch("s", "t4", 60_000);
    assert.equal(orphans.size, 3, "max + 1: one dropped");
    failing = false;
    orphans.cameBack(w2, "t2"); // still kept: t1, ready, went first
    await turnsUntil(() => orphans.size === 2, time.real);
    assert.deepEqual(released, ["t1", "t2"]);
    orphans.watch("s", "t5", 60_000);
    orphans.watch("s", "t6", 60_000); // past max: the oldest watched, w3, goes
    orphans.cameBack(w3, "t3");
    orphans.cameBack(w4, "t4");
    await turnsUntil(() => released.length === 3, time.real);
    assert.deepEqual(released, ["t1", "t2", "t4"]);
  } finally {
    time.restore();
  }
});

Deno.test("Orphans keeps 10,000 orphans by default", () => {
  const orphans = new Orphans(() => Promise.resolve("applied"));
  const first = orphans.watch("s", "t0", 60_000);
  for (let i = 1; i < 10_000; i++) orphans.watch("s", `t${i}`, 60_000);
  assert.equal(orphans.size, 10_000);
  orphans.cameBack(first, undefined); // still watched: it leaves
  assert.equal(orphans.size, 9_999);
  orphans.watch("s", "a", 60_000);
  orphans.watch("s", "b", 60_000);
  assert.equal(orphans.size, 10_000);
});

Deno.test("Orphans retries a failing pass after 200 ms doubled up to 5 s, from half the ceiling, and starts over after a success", async () => {
  let failing = true;
  let releases = 0;
  const orphans = new Orphans(() => {
    releases++;
    return failing
      ? Promise.reject(new Error("down"))
      : Promise.resolve("applied");
  });
  const time = fakeGlobalTimers();
  const random = Math.random;
  Math.random = () => 0; // equal jitter at its low end: half the ceiling
  try {
    orphans.undo("s", "t", 3_600_000);
    const waits: number[] = [];
    for (let attempt = 1; attempt <= 7; attempt++) {
      await turnsUntil(() => time.pending.length === 1, time.real);
      waits.push(time.pending[0]!.at - time.clock.now());
      await time.advanceTo(time.pending[0]!.at);
      await turnsUntil(() => releases === attempt + 1, time.real);
    }
    assert.deepEqual(waits, [100, 200, 400, 800, 1_600, 2_500, 2_500]);
    Math.random = () => 1 - Number.EPSILON; // the high end: the ceiling
    await turnsUntil(() => time.pending.length === 1, time.real);
    await time.advanceTo(time.pending[0]!.at);
    await turnsUntil(() => releases === 9, time.real);
    await turnsUntil(() => time.pending.length === 1, time.real);
    assert.equal(Math.round(time.pending[0]!.at - time.clock.now()), 5_000);
    failing = false;
    await time.advanceTo(time.pending[0]!.at);
    await turnsUntil(() => orphans.size === 0, time.real);
    failing = true;
    orphans.undo("s", "u", 3_600_000);
    await turnsUntil(() => time.pending.length === 1, time.real);
    assert.equal(Math.round(time.pending[0]!.at - time.clock.now()), 200);
  } finally {
    Math.random = random;
    time.restore();
  }
});

Deno.test("Orphans keeps trying a release for one lease: a millisecond before its end, not at it", async () => {
  let releases = 0;
  const orphans = new Orphans(() => {
    releases++;
    return Promise.reject(new Error("down"));
  });
  const time = fakeGlobalTimers();
  const realNow = Date.now;
  let now = 1_000_000;
  Date.now = () => now;
  try {
    const retry = async (at: number) => {
      await turnsUntil(() => time.pending.length === 1, time.real);
      now = at;
      await time.advanceTo(time.pending[0]!.at);
    };
    orphans.undo("s", "t", 1_000); // kept until 1,001,000
    await retry(1_000_999);
    await turnsUntil(() => releases === 2, time.real);
    await retry(1_001_000);
    await turnsUntil(() => orphans.size === 0, time.real);
    assert.equal(releases, 2, "the lease has ended: no release is sent");
  } finally {
    Date.now = realNow;
    time.restore();
  }
});
