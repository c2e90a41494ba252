// Copyright 2026 the @idempotent/http authors. MIT license.
import assert from "node:assert/strict";
import fc from "fast-check";
import { capture } from "../src/_capture.ts";

/** What `capture` resolves to. */
type CaptureResult = Awaited<ReturnType<typeof capture>>;

/** A pull-based source over `frames` that counts pulls and records cancels. */
function source(
  frames: readonly unknown[],
  options: { errorAt?: number; error?: unknown } = {},
) {
  const state = { pulls: 0, cancelled: false, reason: undefined as unknown };
  let index = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      state.pulls++;
      if (index === options.errorAt) {
        controller.error(options.error);
      } else if (index < frames.length) {
        controller.enqueue(frames[index++] as Uint8Array);
      } else {
        controller.close();
      }
    },
    cancel(reason) {
      state.cancelled = true;
      state.reason = reason;
    },
  }, { highWaterMark: 0 });
  return { stream, state };
}

/** Bytes 0, 1, 2, … (mod 256) of the given length. */
function bytes(length: number, from = 0): Uint8Array<ArrayBuffer> {
  return Uint8Array.from({ length }, (_, i) => (from + i) % 256);
}

function join(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

/** Reads a stream to its end or error: the chunks, and the error if any. */
async function drain(stream: ReadableStream<Uint8Array>) {
  const chunks: Uint8Array[] = [];
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { chunks, error: undefined, errored: false };
      chunks.push(value);
    }
  } catch (error) {
    return { chunks, error, errored: true };
  }
}

function assertOutcome<O extends CaptureResult["outcome"]>(
  result: CaptureResult,
  outcome: O,
): asserts result is Extract<CaptureResult, { outcome: O }> {
  assert.equal(result.outcome, outcome);
}

Deno.test("capture() returns within and a zero-length array for an empty body", async () => {
  const { stream } = source([]);
  const result = await capture(stream, 16);
  assertOutcome(result, "within");
  assert.equal(result.bytes.byteLength, 0);
});

Deno.test("capture() returns within for a body of exactly cap bytes", async () => {
  const { stream } = source([bytes(3), new Uint8Array(0), bytes(5, 3)]);
  const result = await capture(stream, 8);
  assertOutcome(result, "within");
  assert.deepEqual(result.bytes, bytes(8));
});

Deno.test("capture() returns within for a body of cap - 1 bytes", async () => {
  const { stream } = source([bytes(4), bytes(3, 4)]);
  const result = await capture(stream, 8);
  assertOutcome(result, "within");
  assert.deepEqual(result.bytes, bytes(7));
});

Deno.test("capture() returns overflow for a body of cap + 1 bytes", async () => {
  const { stream } = source([bytes(4), bytes(5, 4)]);
  const result = await capture(stream, 8);
  assertOutcome(result, "overflow");
  assert.deepEqual(result.prefix, bytes(8));
  const { chunks, errored } = await drain(result.rest);
  assert.equal(errored, false);
  assert.deepEqual(chunks, [bytes(1, 8)]);
  // The source ended: its lock stays, as on `within`; nothing is left to read.
  assert.equal(stream.locked, true);
});

Deno.test("capture() with cap 0 returns within for empty frames and overflow for a byte", async () => {
  const empty = await capture(
    source([new Uint8Array(0), new Uint8Array(0)]).stream,
    0,
  );
  assertOutcome(empty, "within");
  assert.equal(empty.bytes.byteLength, 0);

  const one = await capture(source([new Uint8Array(0), bytes(1)]).stream, 0);
  assertOutcome(one, "overflow");
  assert.equal(one.prefix.byteLength, 0);
  assert.deepEqual((await drain(one.rest)).chunks, [bytes(1)]);
});

Deno.test("capture() returns a single whole frame without copying and copies anything else", async () => {
  const frame = bytes(10);
  const single = await capture(source([frame]).stream, 10);
  assertOutcome(single, "within");
  assert.equal(single.bytes, frame);

  const view = bytes(20).subarray(5, 15);
  const partial = await capture(source([view]).stream, 10);
  assertOutcome(partial, "within");
  assert.notEqual(partial.bytes.buffer, view.buffer);
  assert.deepEqual(partial.bytes, view);

  const parts = [bytes(4), bytes(6, 4)];
  const many = await capture(source(parts).stream, 10);
  assertOutcome(many, "within");
  assert.equal(many.bytes.buffer.byteLength, 10);
  assert.deepEqual(many.bytes, bytes(10));
});

Deno.test("capture() copies the prefix of a single frame that crosses the cap: it shares no buffer with the frame", async () => {
  const frame = bytes(16);
  const result = await capture(source([frame]).stream, 10);
  assertOutcome(result, "overflow");
  assert.notEqual(result.prefix.buffer, frame.buffer);
  assert.equal(result.prefix.buffer.byteLength, 10);
  frame.fill(0);
  assert.deepEqual(result.prefix, bytes(10));
  const { chunks } = await drain(result.rest);
  assert.deepEqual(join(chunks), new Uint8Array(6));
});

Deno.test("capture() copies a single frame backed by a SharedArrayBuffer into a plain ArrayBuffer of its size", async () => {
  const shared = new Uint8Array(new SharedArrayBuffer(12)).subarray(2, 9);
  shared.set(bytes(7));
  const result = await capture(source([shared]).stream, 8);
  assertOutcome(result, "within");
  assert.ok(result.bytes.buffer instanceof ArrayBuffer);
  assert.equal(result.bytes.buffer.byteLength, 7);
  assert.deepEqual(result.bytes, bytes(7));
});

Deno.test("capture() copies the one frame read before a source error into the failed prefix", async () => {
  const frame = bytes(5);
  const error = new Error("boom");
  const { stream } = source([frame], { errorAt: 1, error });
  const result = await capture(stream, 8);
  assertOutcome(result, "failed");
  assert.notEqual(result.prefix.buffer, frame.buffer);
  frame.fill(0);
  assert.deepEqual(result.prefix, bytes(5));
});

Deno.test("capture() hands on the tail of one giant frame as a view, without copying", async () => {
  const frame = bytes(8 << 20);
  const result = await capture(source([frame]).stream, 1024);
  assertOutcome(result, "overflow");
  assert.deepEqual(result.prefix, bytes(1024));
  const { chunks } = await drain(result.rest);
  assert.equal(chunks.length, 1);
  const [chunk] = chunks;
  assert.equal(chunk!.buffer, frame.buffer);
  assert.equal(chunk!.byteOffset, 1024);
  assert.equal(chunk!.byteLength, (8 << 20) - 1024);
});

Deno.test("capture() rest forwards cancel to the source with the reason", async () => {
  const { stream, state } = source([bytes(8), bytes(8), bytes(8)]);
  const result = await capture(stream, 4);
  assertOutcome(result, "overflow");
  const reason = new Error("client left");
  await result.rest.cancel(reason);
  assert.equal(state.cancelled, true);
  assert.equal(state.reason, reason);
  assert.equal(stream.locked, false);
});

Deno.test("capture() rest forwards cancel to the source while a read is pending", async () => {
  let reason: unknown;
  let pulls = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulls++ > 0) return new Promise(() => {}); // never sends more
      controller.enqueue(bytes(8));
      return Promise.resolve();
    },
    cancel(why) {
      reason = why;
    },
  }, { highWaterMark: 0 });
  const result = await capture(stream, 4);
  assertOutcome(result, "overflow");
  const reader = result.rest.getReader();
  assert.deepEqual((await reader.read()).value, bytes(4, 4));
  const pending = reader.read();
  await reader.cancel("client left");
  assert.deepEqual(await pending, { done: true, value: undefined });
  assert.equal(reason, "client left");
});

Deno.test("capture() returns failed with the exact prefix when the source errors before the cap", async () => {
  const error = new Error("boom");
  const { stream } = source([bytes(3), bytes(2, 3)], { errorAt: 2, error });
  const result = await capture(stream, 8);
  assertOutcome(result, "failed");
  assert.equal(result.error, error);
  assert.deepEqual(result.prefix, bytes(5));
  assert.equal(stream.locked, false);
});

Deno.test("capture() returns overflow and errors rest after its bytes when the source errors after the cap", async () => {
  const error = new Error("boom");
  const frames = [bytes(6), bytes(6, 6), bytes(6, 12)];
  const { stream } = source(frames, { errorAt: 3, error });
  const result = await capture(stream, 8);
  assertOutcome(result, "overflow");
  assert.deepEqual(result.prefix, bytes(8));
  const drained = await drain(result.rest);
  assert.equal(drained.errored, true);
  assert.equal(drained.error, error);
  assert.deepEqual(join(drained.chunks), bytes(10, 8));
});

Deno.test("capture() rest reads nothing from the source until it is read", async () => {
  const { stream, state } = source([bytes(3), bytes(3), bytes(3), bytes(3)]);
  const result = await capture(stream, 4);
  assertOutcome(result, "overflow");
  assert.equal(state.pulls, 2);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(state.pulls, 2);

  const reader = result.rest.getReader();
  assert.deepEqual((await reader.read()).value, bytes(2, 1));
  assert.equal(state.pulls, 2);
  assert.deepEqual((await reader.read()).value, bytes(3));
  assert.equal(state.pulls, 3);
  await reader.cancel();
});

Deno.test("capture() returns failed with a TypeError for a chunk that is not a Uint8Array", async () => {
  const { stream, state } = source([bytes(2), "text"]);
  const result = await capture(stream, 8);
  assertOutcome(result, "failed");
  assert.ok(result.error instanceof TypeError);
  assert.match(result.error.message, /string/);
  assert.deepEqual(result.prefix, bytes(2));
  assert.equal(state.cancelled, true);
  assert.equal(state.reason, result.error);
  assert.equal(stream.locked, false);
});

Deno.test("capture() rest errors with a TypeError for a chunk that is not a Uint8Array", async () => {
  const { stream, state } = source([bytes(6), new Uint16Array(2)]);
  const result = await capture(stream, 4);
  assertOutcome(result, "overflow");
  const drained = await drain(result.rest);
  assert.ok(drained.error instanceof TypeError);
  assert.deepEqual(drained.chunks, [bytes(2, 4)]);
  assert.equal(state.reason, drained.error);
});

Deno.test("capture() rest copies a frame backed by a SharedArrayBuffer", async () => {
  const shared = new Uint8Array(new SharedArrayBuffer(4));
  shared.set([1, 2, 3, 4]);
  const result = await capture(source([bytes(2), shared]).stream, 1);
  assertOutcome(result, "overflow");
  const { chunks } = await drain(result.rest);
  assert.equal(chunks.length, 2);
  assert.ok(chunks.every((chunk) => chunk.buffer instanceof ArrayBuffer));
  assert.deepEqual(chunks[1], new Uint8Array([1, 2, 3, 4]));
});

Deno.test("capture() rejects a cap that is not a non-negative safe integer", async () => {
  for (const cap of [-1, 1.5, NaN, Infinity, 2 ** 53]) {
    const { stream } = source([]);
    await assert.rejects(capture(stream, cap), {
      name: "RangeError",
      message: `'cap' must be a non-negative integer: current value is ${cap}`,
    });
    assert.equal(stream.locked, false);
  }
});

// Properties

/**
 * The same bytes as a frame of its own buffer, a view into a larger buffer
 * (so a lone frame takes the copying path, not the as-is one), or a view of
 * a `SharedArrayBuffer`.
 */
function shaped(
  content: Uint8Array,
  shape: "whole" | "view" | "shared",
): Uint8Array {
  if (shape === "whole") return content;
  const buffer = shape === "view"
    ? new ArrayBuffer(content.byteLength + 3)
    : new SharedArrayBuffer(content.byteLength + 3);
  const view = new Uint8Array(buffer, 1, content.byteLength);
  view.set(content);
  return view;
}

const shape = fc.constantFrom("whole", "view", "shared");
const frame = fc.oneof(
  {
    arbitrary: fc.tuple(fc.uint8Array({ maxLength: 48 }), shape).map((
      [content, how],
    ) => shaped(content, how)),
    weight: 4,
  },
  { arbitrary: fc.constant(new Uint8Array(0)), weight: 1 },
);
const frameLists = fc.oneof(
  fc.array(frame, { maxLength: 16 }),
  fc.tuple(fc.uint8Array({ maxLength: 4096 }), shape).map((
    [giant, how],
  ) => [shaped(giant, how)]),
);

/**
 * A captured array that is not the one whole frame itself is a copy: an
 * exact-size plain `ArrayBuffer` that no frame shares.
 */
function assertCopy(bytes: Uint8Array, frames: readonly Uint8Array[]): void {
  assert.ok(bytes.buffer instanceof ArrayBuffer);
  assert.equal(bytes.byteOffset, 0);
  assert.equal(bytes.byteLength, bytes.buffer.byteLength);
  assert.ok(frames.every((f) => f.buffer !== bytes.buffer));
}

/** `within` bytes: the one whole frame as it is, else a copy. */
function assertWithinBytes(
  bytes: Uint8Array,
  frames: readonly Uint8Array[],
): void {
  const only = frames.length === 1 ? frames[0]! : undefined;
  if (only !== undefined && bytes === only) {
    assert.ok(only.buffer instanceof ArrayBuffer);
    assert.equal(only.byteOffset, 0);
    assert.equal(only.byteLength, only.buffer.byteLength);
  } else {
    assertCopy(bytes, frames);
  }
}

function totalOf(frames: readonly Uint8Array[]): number {
  return frames.reduce((n, f) => n + f.byteLength, 0);
}

/** A cap biased around `total - 1`, `total`, `total + 1`. */
function capNear(total: number) {
  return fc.oneof(
    fc.constantFrom(-1, 0, 1).map((d) => Math.max(0, total + d)),
    fc.nat({ max: total + 2 }),
  );
}

Deno.test("capture() gives back every byte in order, split exactly at the cap", async () => {
  await fc.assert(
    fc.asyncProperty(
      frameLists.chain((frames) =>
        fc.tuple(fc.constant(frames), capNear(totalOf(frames)))
      ),
      async ([frames, cap]) => {
        const total = totalOf(frames);
        const result = await capture(source(frames).stream, cap);
        assert.equal(result.outcome, total <= cap ? "within" : "overflow");
        if (result.outcome === "within") {
          assert.deepEqual(result.bytes, join(frames));
          assertWithinBytes(result.bytes, frames);
        } else if (result.outcome === "overflow") {
          assert.equal(result.prefix.byteLength, cap);
          assertCopy(result.prefix, frames);
          const { chunks, errored } = await drain(result.rest);
          assert.ok(chunks.every((c) => c.buffer instanceof ArrayBuffer));
          assert.equal(errored, false);
          assert.deepEqual(join([result.prefix, ...chunks]), join(frames));
        }
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("capture() keeps every byte before a source error, as failed or through rest", async () => {
  await fc.assert(
    fc.asyncProperty(
      frameLists.chain((frames) =>
        fc.tuple(
          fc.constant(frames),
          fc.nat({ max: frames.length }),
          capNear(totalOf(frames)),
        )
      ),
      async ([frames, errorAt, cap]) => {
        const error = new Error("injected");
        const before = join(frames.slice(0, errorAt));
        const { stream } = source(frames, { errorAt, error });
        const result = await capture(stream, cap);
        if (before.byteLength > cap) {
          assertOutcome(result, "overflow");
          assert.equal(result.prefix.byteLength, cap);
          const drained = await drain(result.rest);
          assert.equal(drained.error, error);
          assert.deepEqual(join([result.prefix, ...drained.chunks]), before);
        } else {
          assertOutcome(result, "failed");
          assert.equal(result.error, error);
          assert.deepEqual(result.prefix, before);
          assertCopy(result.prefix, frames);
        }
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("capture() stops as unfinished when stop settles, and rest loses no frame", async () => {
  const frames = [
    new Uint8Array([1, 2]),
    new Uint8Array([3]),
    new Uint8Array([4, 5, 6]),
  ];
  let sent = 0;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  let waiting!: () => void;
  const late = new Promise<void>((resolve) => waiting = resolve);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent === 1) {
        waiting();
        await gate; // the second frame comes late
      }
      const frame = frames[sent++];
      if (frame) controller.enqueue(frame);
      else controller.close();
    },
  }, { highWaterMark: 0 });
  let stop!: () => void;
  const stopping = new Promise<void>((resolve) => stop = resolve);
  const pending = capture(body, 1024, stopping);
  await late; // the first frame was read; the second is awaited
  stop();
  const result = await pending;
  assert.equal(result.outcome, "unfinished");
  if (result.outcome !== "unfinished") return;
  assert.deepEqual(result.prefix, new Uint8Array([1, 2]));
  release();
  const rest = new Uint8Array(await new Response(result.rest).arrayBuffer());
  assert.deepEqual(
    rest,
    new Uint8Array([3, 4, 5, 6]),
    "the read pending at the stop is the first of rest",
  );
});

Deno.test("capture() ignores a stop that settles after the body ended", async () => {
  const result = await capture(
    new Response("done").body!,
    1024,
    new Promise(() => {}),
  );
  assert.equal(result.outcome, "within");
});

Deno.test("capture() keeps an overflow's rest whole when stop settles after the capture ended", async () => {
  const { stream } = source([bytes(4), bytes(4, 4), bytes(4, 8)]);
  let stop!: () => void;
  const stopping = new Promise<void>((resolve) => stop = resolve);
  const result = await capture(stream, 5, stopping);
  assertOutcome(result, "overflow");
  stop();
  await stopping;
  await Promise.resolve(); // the stop's reaction has run
  const rest = await drain(result.rest);
  assert.equal(rest.errored, false, `rest errored: ${rest.error}`);
  assert.deepEqual(join([result.prefix, ...rest.chunks]), bytes(12));
});

Deno.test("capture() keeps an overflow's rest whole when stop settles while rest's read is pending", async () => {
  let sent = 0;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  let waiting!: () => void;
  const late = new Promise<void>((resolve) => waiting = resolve);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent === 1) {
        waiting();
        await gate; // the frame after the overflow's comes late
      }
      if (sent < 3) controller.enqueue(bytes(4, 4 * sent++));
      else controller.close();
    },
  }, { highWaterMark: 0 });
  let stop!: () => void;
  const stopping = new Promise<void>((resolve) => stop = resolve);
  const result = await capture(body, 3, stopping);
  assertOutcome(result, "overflow");
  const draining = drain(result.rest);
  await late;
  stop();
  await stopping;
  release();
  const rest = await draining;
  assert.equal(rest.errored, false, `rest errored: ${rest.error}`);
  assert.deepEqual(join([result.prefix, ...rest.chunks]), bytes(12));
});

Deno.test("capture() stops as unfinished when stop rejects, as when it resolves", async () => {
  for (const settle of ["resolve", "reject"] as const) {
    let waiting!: () => void;
    const late = new Promise<void>((resolve) => waiting = resolve);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sent === 1) {
          waiting();
          await new Promise(() => {}); // the second frame never comes
        }
        controller.enqueue(bytes(2, 2 * sent++));
      },
    }, { highWaterMark: 0 });
    let end!: { resolve: () => void; reject: (e: Error) => void };
    const stopping = new Promise<void>((resolve, reject) =>
      end = { resolve, reject }
    );
    stopping.catch(() => {});
    const pending = capture(body, 1024, stopping);
    await late;
    if (settle === "resolve") end.resolve();
    else end.reject(new Error("handler gone"));
    const result = await pending;
    assertOutcome(result, "unfinished");
    assert.deepEqual(result.prefix, bytes(2), settle);
  }
});
