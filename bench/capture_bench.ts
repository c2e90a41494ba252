// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Benchmarks for `capture()` (DESIGN §3), each group with memcpy of the same
 * bytes as its baseline.
 *
 * Every run allocates 1 MiB; under glibc's defaults that is a fresh `mmap`
 * whose page faults can make a run several times slower, which shows as a
 * bimodal, noisy average. For steadier numbers run with
 * `MALLOC_MMAP_THRESHOLD_=134217728 MALLOC_TRIM_THRESHOLD_=1073741824`.
 *
 * @module
 */

import { capture } from "../src/capture.ts";
import { concatBytes } from "../src/_bytes.ts";

const MIB = 1 << 20;
const CAP = MIB;
const FRAME = 4 * 1024;

/** Frames of `FRAME` bytes (the last one shorter) adding up to `total`. */
function framesOf(total: number): Uint8Array[] {
  const frames: Uint8Array[] = [];
  for (let offset = 0; offset < total; offset += FRAME) {
    frames.push(new Uint8Array(Math.min(FRAME, total - offset)).fill(offset));
  }
  return frames;
}

/** A fresh pull-based stream over pre-built frames: cheap to make per run. */
function streamOf(frames: readonly Uint8Array[]): ReadableStream<Uint8Array> {
  let index = 0;
  return new ReadableStream({
    pull(controller) {
      if (index < frames.length) controller.enqueue(frames[index++]!);
      else controller.close();
    },
  });
}

function memcpy(frames: readonly Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let offset = 0;
  for (const frame of frames) {
    out.set(frame, offset);
    offset += frame.byteLength;
  }
  return out;
}

/**
 * A stop that does not settle, made per capture as the middleware makes one
 * per request (one shared promise would pile up a reaction per run).
 */
const never = () => new Promise<void>(() => {});

/**
 * What any bounded capture of these frames must do at least: read every frame
 * through a reader, then copy the first `cap` bytes at most into one
 * exact-size array (with the copy capture uses).
 */
async function readThenCopy(
  frames: readonly Uint8Array[],
  cap: number,
): Promise<void> {
  const reader = streamOf(frames).getReader();
  const kept: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const take = Math.min(value.byteLength, cap - length);
    if (take > 0) {
      kept.push(take === value.byteLength ? value : value.subarray(0, take));
      length += take;
    }
  }
  concatBytes(kept, length);
}

async function captureAndDrain(
  frames: readonly Uint8Array[],
  cap: number,
  stop?: Promise<void>,
): Promise<void> {
  const result = await capture(streamOf(frames), cap, stop);
  if (result.outcome === "failed") throw result.error;
  if (result.outcome === "overflow") {
    const reader = result.rest.getReader();
    while (!(await reader.read()).done);
  }
}

for (
  const [label, total] of [
    ["cap - 1", CAP - 1],
    ["cap", CAP],
    ["cap + 1", CAP + 1],
  ] as const
) {
  const frames = framesOf(total);
  const group = `many 4 KiB frames, 1 MiB cap, body of ${label}`;
  Deno.bench("memcpy", { group, baseline: true }, () => {
    memcpy(frames, total);
  });
  Deno.bench("capture", { group }, async () => {
    await captureAndDrain(frames, CAP);
  });
  Deno.bench("capture with a stop (as the middleware calls it)", {
    group,
  }, async () => {
    await captureAndDrain(frames, CAP, never());
  });
  Deno.bench("naive full read", { group }, async () => {
    await new Response(streamOf(frames)).arrayBuffer();
  });
  Deno.bench("read the frames only (stream floor)", { group }, async () => {
    const reader = streamOf(frames).getReader();
    while (!(await reader.read()).done);
  });
  Deno.bench("read the frames, then memcpy them (capture's floor)", {
    group,
  }, async () => {
    await readThenCopy(frames, CAP);
  });
}

{
  const group = "one small frame (a typical JSON answer)";
  const small = [
    new TextEncoder().encode('{"id":"pay_1","status":"succeeded"}'),
  ];
  Deno.bench("capture", { group, baseline: true }, async () => {
    await captureAndDrain(small, CAP);
  });
  Deno.bench("capture with a stop (as the middleware calls it)", {
    group,
  }, async () => {
    await captureAndDrain(small, CAP, never());
  });
  Deno.bench("naive full read", { group }, async () => {
    await new Response(streamOf(small)).arrayBuffer();
  });
}

{
  const group = "single frame within the cap (1 MiB)";
  const whole = [new Uint8Array(CAP).fill(1)];
  const view = [new Uint8Array(CAP + 1).fill(1).subarray(1)];
  Deno.bench("memcpy 1 MiB", { group, baseline: true }, () => {
    memcpy(whole, CAP);
  });
  Deno.bench("capture, whole-buffer frame (returned as is)", {
    group,
  }, async () => {
    await captureAndDrain(whole, CAP);
  });
  Deno.bench("capture, frame that is a view (copied)", {
    group,
  }, async () => {
    await captureAndDrain(view, CAP);
  });
}

{
  const group = "single giant frame over a 1 MiB cap";
  const small = [new Uint8Array(CAP + 1).fill(2)];
  const giant = [new Uint8Array(64 * MIB).fill(3)];
  Deno.bench("memcpy 1 MiB", { group, baseline: true }, () => {
    memcpy([small[0]!.subarray(0, CAP)], CAP);
  });
  Deno.bench("capture, cap + 1 frame", { group }, async () => {
    await captureAndDrain(small, CAP);
  });
  Deno.bench("capture, 64 MiB frame", { group }, async () => {
    await captureAndDrain(giant, CAP);
  });
  Deno.bench("read the 64 MiB frame, then memcpy 1 MiB (the floor)", {
    group,
  }, async () => {
    await readThenCopy(giant, CAP);
  });
}
