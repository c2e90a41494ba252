// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The cases of the `capture()` benchmarks, shared by `capture_bench.ts`
 * (`deno bench`, one case after another) and `capture_compare.ts` (rounds
 * that alternate the cases of a group, so that load from anything else on
 * the machine falls on all of them alike).
 *
 * @module
 */

import { capture } from "../src/_capture.ts";
import { concatBytes } from "../src/_bytes.ts";

const MIB = 1 << 20;
const CAP = MIB;
const FRAME = 4 * 1024;

/** One measured call, in a group beside its baseline. */
export interface CaptureCase {
  /** The group: its cases are compared with each other. */
  group: string;
  /** What is measured. */
  name: string;
  /** Whether this is the group's baseline. */
  baseline?: boolean;
  /** One call: a promise to wait for, unless `sync`. */
  fn: () => unknown;
  /** Whether `fn` returns no promise (timed without an `await`). */
  sync?: boolean;
}

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

/**
 * The baseline: one plain copy of every byte into a new array. Not
 * `concatBytes`, whose single-chunk path copies by the typed-array
 * constructor: a baseline must not move when capture's copy does.
 */
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

/**
 * Every case, in groups, each group with its baseline first.
 *
 * @returns The cases, their frames built once.
 */
export function captureCases(): CaptureCase[] {
  const cases: CaptureCase[] = [];
  for (
    const [label, total] of [
      ["cap - 1", CAP - 1],
      ["cap", CAP],
      ["cap + 1", CAP + 1],
    ] as const
  ) {
    const frames = framesOf(total);
    const group = `many 4 KiB frames, 1 MiB cap, body of ${label}`;
    cases.push(
      {
        group,
        name: "memcpy",
        baseline: true,
        sync: true,
        fn: () => memcpy(frames, total),
      },
      { group, name: "capture", fn: () => captureAndDrain(frames, CAP) },
      {
        group,
        name: "capture with a stop (as the middleware calls it)",
        fn: () => captureAndDrain(frames, CAP, never()),
      },
      {
        group,
        name: "naive full read",
        fn: () => new Response(streamOf(frames)).arrayBuffer(),
      },
      {
        group,
        name: "read the frames only (stream floor)",
        fn: async () => {
          const reader = streamOf(frames).getReader();
          while (!(await reader.read()).done);
        },
      },
      {
        group,
        name: "read the frames, then memcpy them (capture's floor)",
        fn: () => readThenCopy(frames, CAP),
      },
    );
  }
  {
    const group = "one small frame (a typical JSON answer)";
    const small = [
      new TextEncoder().encode('{"id":"pay_1","status":"succeeded"}'),
    ];
    cases.push(
      {
        group,
        name: "capture",
        baseline: true,
        fn: () => captureAndDrain(small, CAP),
      },
      {
        group,
        name: "capture with a stop (as the middleware calls it)",
        fn: () => captureAndDrain(small, CAP, never()),
      },
      {
        group,
        name: "naive full read",
        fn: () => new Response(streamOf(small)).arrayBuffer(),
      },
    );
  }
  {
    const group = "single frame within the cap (1 MiB)";
    const whole = [new Uint8Array(CAP).fill(1)];
    const view = [new Uint8Array(CAP + 1).fill(1).subarray(1)];
    cases.push(
      {
        group,
        name: "memcpy 1 MiB",
        baseline: true,
        sync: true,
        fn: () => memcpy(whole, CAP),
      },
      {
        group,
        name: "capture, whole-buffer frame (returned as is)",
        fn: () => captureAndDrain(whole, CAP),
      },
      {
        group,
        name: "capture, frame that is a view (copied)",
        fn: () => captureAndDrain(view, CAP),
      },
    );
  }
  {
    const group = "single giant frame over a 1 MiB cap";
    const small = [new Uint8Array(CAP + 1).fill(2)];
    const giant = [new Uint8Array(64 * MIB).fill(3)];
    cases.push(
      {
        group,
        name: "memcpy 1 MiB",
        baseline: true,
        sync: true,
        fn: () => memcpy([small[0]!.subarray(0, CAP)], CAP),
      },
      {
        group,
        name: "capture, cap + 1 frame",
        fn: () => captureAndDrain(small, CAP),
      },
      {
        group,
        name: "capture, 64 MiB frame",
        fn: () => captureAndDrain(giant, CAP),
      },
      {
        group,
        name: "read the 64 MiB frame, then memcpy 1 MiB (the floor)",
        fn: () => readThenCopy(giant, CAP),
      },
    );
  }
  return cases;
}
