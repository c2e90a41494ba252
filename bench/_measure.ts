// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The one measuring loop of the `*_compare.ts` scripts: sequential timings
 * (p50/p99/mean in µs, with a warm-up and per-call counters), calls per
 * second at a number in flight, rounds that alternate the cases so that load
 * from anything else on the machine falls on all of them alike, and the
 * median and ratio helpers of the reports. Every figure a report gives is a
 * ratio to a baseline measured in the same run.
 *
 * @module
 */

/** A summary of sequential timings, in microseconds. */
export interface Timings {
  /** How many calls were timed. */
  n: number;
  p50: number;
  p99: number;
  mean: number;
  /** Per timed call, how much each counter grew (for example round trips). */
  per: Record<string, number>;
}

/**
 * The value at quantile `q` of ascending `sorted` values.
 *
 * @param sorted Ascending values.
 * @param q The quantile, 0 to 1.
 * @returns The value.
 */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;
}

/**
 * The median of `values` (the upper one of an even count).
 *
 * @param values The values, in any order.
 * @returns The median.
 */
export function median(values: number[]): number {
  return percentile([...values].sort((a, b) => a - b), 0.5);
}

/**
 * Summarizes timings in µs.
 *
 * @param times The timings, in any order (sorted in place).
 * @param per The counters' growth per call.
 * @returns p50, p99 and mean.
 */
export function summarize(
  times: number[],
  per: Record<string, number> = {},
): Timings {
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  return {
    n: times.length,
    p50: percentile(times, 0.5),
    p99: percentile(times, 0.99),
    mean,
    per,
  };
}

/**
 * Times `n` sequential calls of `fn`, in µs each.
 *
 * @param fn The call; it gets its index.
 * @param n How many calls.
 * @returns The timings, in call order.
 */
export async function sequential(
  fn: (i: number) => Promise<unknown>,
  n: number,
): Promise<number[]> {
  const times: number[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn(i);
    times[i] = (performance.now() - t0) * 1000;
  }
  return times;
}

/** Options of {@linkcode timed}. */
export interface TimedOptions {
  /** How many calls are timed. */
  iterations: number;
  /** How many calls run first, untimed (they get indexes -1, -2, …). */
  warmup?: number;
  /** Counters read before and after the timed calls (not the warm-up). */
  counters?: Record<string, () => number>;
}

/**
 * Warms `fn` up, then times `iterations` sequential calls and reports how
 * much each counter grew per call.
 *
 * @param fn The call; timed calls get 0, 1, …, warm-up calls -1, -2, ….
 * @param options Iterations, warm-up and counters.
 * @returns The summary.
 */
export async function timed(
  fn: (i: number) => Promise<unknown>,
  options: TimedOptions,
): Promise<Timings> {
  const { iterations, warmup = 0, counters = {} } = options;
  for (let i = 0; i < warmup; i++) await fn(-1 - i);
  const before = Object.entries(counters).map(([name, read]) =>
    [name, read()] as const
  );
  const times = await sequential(fn, iterations);
  const per: Record<string, number> = {};
  for (const [name, start] of before) {
    per[name] = (counters[name]!() - start) / iterations;
  }
  return summarize(times, per);
}

/** The timings of one named case. */
export interface Case extends Timings {
  /** What was measured. */
  name: string;
}

/**
 * {@linkcode timed}, named.
 *
 * @param name What is measured.
 * @param fn The call.
 * @param options Iterations, warm-up and counters.
 * @returns The named summary.
 */
export async function timedCase(
  name: string,
  fn: (i: number) => Promise<unknown>,
  options: TimedOptions,
): Promise<Case> {
  return { name, ...await timed(fn, options) };
}

/**
 * Runs `inFlight` callers of `fn` in a loop for `seconds`, counting calls.
 *
 * @param fn The call; it gets a running index.
 * @param seconds How long.
 * @param inFlight How many callers at once.
 * @returns The calls done and the seconds they really took.
 */
export async function throughput(
  fn: (i: number) => Promise<unknown>,
  seconds: number,
  inFlight = 32,
): Promise<{ done: number; seconds: number }> {
  let i = 0;
  let done = 0;
  const end = performance.now() + seconds * 1000;
  const worker = async () => {
    while (performance.now() < end) {
      await fn(i++);
      done++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { done, seconds: (performance.now() - t0) / 1000 };
}

/**
 * Runs every case once a round, for `rounds` rounds, the order reversed
 * every other round, so that drift on the machine falls on every case alike.
 *
 * @param cases The cases.
 * @param rounds How many rounds.
 * @param run Runs one case in one round.
 */
export async function interleaved<C>(
  cases: readonly C[],
  rounds: number,
  run: (which: C, round: number) => Promise<void>,
): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? cases : [...cases].reverse();
    for (const which of order) await run(which, round);
  }
}

/**
 * A ratio to two decimals, for the reports.
 *
 * @param value The measured value.
 * @param baseline The baseline measured in the same run.
 * @returns `value / baseline`, rounded.
 */
export function ratio(value: number, baseline: number): number {
  return +(value / baseline).toFixed(2);
}

/**
 * A Markdown table.
 *
 * @param header The column names.
 * @param rows The cells.
 * @param align A separator cell per column (`"---"` unless given).
 * @returns The table's lines, joined.
 */
export function markdownTable(
  header: string[],
  rows: (string | number)[][],
  align: string[] = header.map(() => "---"),
): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(align), ...rows.map(line)].join("\n");
}
