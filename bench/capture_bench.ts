// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Benchmarks for `capture()` (DESIGN §3), each group with memcpy of the same
 * bytes as its baseline and, beside it, the floor: what any bounded capture
 * must do at least (read every frame through a reader, then copy).
 *
 * Every run allocates 1 MiB; under glibc's defaults that is a fresh `mmap`
 * whose page faults can make a run several times slower, which shows as a
 * bimodal, noisy average. For steadier numbers run with
 * `MALLOC_MMAP_THRESHOLD_=134217728 MALLOC_TRIM_THRESHOLD_=1073741824`.
 * Even so, the heap still grows now and then (the buffers are freed only by
 * the garbage collector) and a run that lands on fresh pages faults 256 times
 * a MiB: a p75 of several hundred µs is that mode, not the code.
 * `capture_compare.ts` runs the same cases in alternating rounds.
 *
 * @module
 */

import { captureCases } from "./_capture_cases.ts";

for (const { group, name, baseline = false, fn, sync } of captureCases()) {
  Deno.bench(
    name,
    { group, baseline },
    sync ? () => void fn() : async () => void await fn(),
  );
}
