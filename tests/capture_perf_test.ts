// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * capture() with a `stop`, after it stopped racing every read against the
 * stop: the stop now releases the reader's lock, so these pin that no frame
 * is lost however the stop falls between reads, and that a stop after the
 * capture ended never touches the reader `rest` owns.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { capture } from "../src/_capture.ts";

/** A pull stream over `frames`, each enqueued when asked. */
function streamOf(frames: readonly Uint8Array[]): ReadableStream<Uint8Array> {
  let index = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (index < frames.length) controller.enqueue(frames[index++]!);
      else controller.close();
    },
  });
}

async function bytesOf(stream: ReadableStream<Uint8Array>): Promise<number[]> {
  return [...new Uint8Array(await new Response(stream).arrayBuffer())];
}

Deno.test("capture() stopped between two reads keeps every byte, in order, across prefix and rest", async () => {
  const frames = [
    new Uint8Array([1, 2]),
    new Uint8Array([3]),
    new Uint8Array([4, 5]),
  ];
  // Already settled: the stop lands while a frame is being handled, when no
  // read is pending.
  const result = await capture(streamOf(frames), 1024, Promise.resolve());
  assert.equal(result.outcome, "unfinished");
  if (result.outcome !== "unfinished") return;
  assert.deepEqual(
    [...result.prefix, ...await bytesOf(result.rest)],
    [1, 2, 3, 4, 5],
  );
});

Deno.test("capture() ignores a stop that settles after an overflow: rest stays readable", async () => {
  let stop!: () => void;
  const stopping = new Promise<void>((resolve) => stop = resolve);
  const frames = [
    new Uint8Array([1, 2, 3]),
    new Uint8Array([4]),
    new Uint8Array([5]),
  ];
  const result = await capture(streamOf(frames), 2, stopping);
  assert.equal(result.outcome, "overflow");
  if (result.outcome !== "overflow") return;
  stop();
  await stopping;
  assert.deepEqual([...result.prefix, ...await bytesOf(result.rest)], [
    1,
    2,
    3,
    4,
    5,
  ]);
});

Deno.test("property: capture() with a stop settling after any number of microtasks loses no byte", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.uint8Array({ maxLength: 6 }), { maxLength: 8 }),
      fc.integer({ min: 0, max: 12 }),
      fc.integer({ min: 0, max: 40 }),
      async (frames, ticks, cap) => {
        let stop: Promise<void> = Promise.resolve();
        for (let i = 0; i < ticks; i++) stop = stop.then(() => {});
        const expected = frames.flatMap((f) => [...f]);
        const result = await capture(streamOf(frames), cap, stop);
        switch (result.outcome) {
          case "within":
            assert.deepEqual([...result.bytes], expected);
            break;
          case "overflow":
          case "unfinished":
            assert.deepEqual(
              [...result.prefix, ...await bytesOf(result.rest)],
              expected,
            );
            break;
          default:
            assert.fail(`unexpected ${result.outcome}`);
        }
      },
    ),
    { numRuns: 300 },
  );
});
