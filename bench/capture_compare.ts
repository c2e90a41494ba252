// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * The cases of `capture_bench.ts`, in rounds that alternate the cases of each
 * group (the order reversed every other round), so that load from anything
 * else on the machine and the heap's page-fault mode (see that file) fall on
 * every case of a group alike. Each round times `--batch` calls of each case
 * one by one; the report gives, per case, the p75 over every call and the
 * median over the rounds of its per-round p75 ratio to the group's baseline.
 *
 * ```sh
 * MALLOC_MMAP_THRESHOLD_=134217728 MALLOC_TRIM_THRESHOLD_=1073741824 \
 *   deno run -A bench/capture_compare.ts [--rounds=15] [--batch=40]
 * ```
 *
 * @module
 */

import { type CaptureCase, captureCases } from "./_capture_cases.ts";
import { interleaved, median, percentile } from "./_measure.ts";

function option(name: string, fallback: number): number {
  const arg = Deno.args.find((a) => a.startsWith(`--${name}=`));
  return arg ? Number(arg.slice(name.length + 3)) : fallback;
}

const rounds = option("rounds", 15);
const batch = option("batch", 40);

async function timeOnce(which: CaptureCase): Promise<number> {
  const t0 = performance.now();
  if (which.sync) which.fn();
  else await which.fn();
  return (performance.now() - t0) * 1000;
}

function p75(times: number[]): number {
  return percentile([...times].sort((a, b) => a - b), 0.75);
}

const groups = new Map<string, CaptureCase[]>();
for (const which of captureCases()) {
  const group = groups.get(which.group) ?? [];
  group.push(which);
  groups.set(which.group, group);
}

for (const [group, cases] of groups) {
  const all = new Map<CaptureCase, number[]>(cases.map((c) => [c, []]));
  const perRound = new Map<CaptureCase, number[]>(cases.map((c) => [c, []]));
  for (const which of cases) {
    for (let i = 0; i < batch; i++) await timeOnce(which);
  }
  await interleaved(cases, rounds, async (which) => {
    const times: number[] = [];
    for (let i = 0; i < batch; i++) times.push(await timeOnce(which));
    all.get(which)!.push(...times);
    perRound.get(which)!.push(p75(times));
  });
  const baseline = cases.find((c) => c.baseline)!;
  const base = perRound.get(baseline)!;
  console.log(`\n${group} (${rounds} rounds × ${batch} calls)`);
  for (const which of cases) {
    const ratios = perRound.get(which)!.map((t, round) => t / base[round]!);
    const sorted = [...ratios].sort((a, b) => a - b);
    console.log(
      `  ${which.name.padEnd(54)} p75 ${
        p75(all.get(which)!).toFixed(1).padStart(7)
      } µs  × baseline: median ${median(ratios).toFixed(2)} (middle half ${
        percentile(sorted, 0.25).toFixed(2)
      }–${percentile(sorted, 0.75).toFixed(2)})`,
    );
  }
}
