// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Reads a response body up to a size cap: the hot path of the middleware
 * (docs/architecture.md, "The request's way"). A body that fits is returned as one contiguous copy, made once;
 * a body that does not is split into an exact-size prefix and a lazy `rest`
 * stream that hands the tail on without copying it.
 *
 * @example Capture a small body
 * ```ts
 * import { capture } from "./_capture.ts";
 * import assert from "node:assert/strict";
 *
 * const result = await capture(new Response("hello").body!, 1024);
 * assert.equal(result.outcome, "within");
 * ```
 *
 * @module
 */

import { concatBytes } from "./_bytes.ts";

/**
 * What {@linkcode capture} found, as a discriminated union on `outcome`.
 *
 * - `within`: the whole body, at most `cap` bytes, in one contiguous array.
 * - `overflow`: the body is longer than `cap`. `prefix` holds exactly `cap`
 *   bytes (a copy); `rest` yields everything after them, first the rest of
 *   the frame that crossed the cap (a view of it, not a copy), then the
 *   source's remaining frames as they are, read only when `rest` is read.
 * - `failed`: the body errored (or produced a chunk that is not a
 *   `Uint8Array`) before its end and before more than `cap` bytes were seen;
 *   `prefix` holds the bytes read before that (a copy), `error` the reason.
 * - `unfinished`: `stop` settled before the body ended or crossed the cap;
 *   `prefix` holds the bytes read so far (a copy), `rest` everything after
 *   them, beginning with the read that was pending, so no frame is lost.
 */
export type CaptureResult =
  | { outcome: "within"; bytes: Uint8Array<ArrayBuffer> }
  | {
    outcome: "overflow";
    prefix: Uint8Array<ArrayBuffer>;
    rest: ReadableStream<Uint8Array<ArrayBuffer>>;
  }
  | { outcome: "failed"; prefix: Uint8Array<ArrayBuffer>; error: unknown }
  | {
    outcome: "unfinished";
    prefix: Uint8Array<ArrayBuffer>;
    rest: ReadableStream<Uint8Array<ArrayBuffer>>;
  };

/**
 * Reads `body` until its end, or until more than `cap` bytes have been seen.
 *
 * Frames are held by reference while reading and copied once at the end, so
 * a producer must not reuse a buffer after enqueuing it (the Streams contract
 * already forbids it). A body that is a single frame covering the whole of a
 * plain, fixed-length `ArrayBuffer` is returned as that very array, without a
 * copy; any other body is copied into an exact-size buffer.
 *
 * A chunk that is not a `Uint8Array` (a user stream enqueuing strings, say)
 * ends the capture as `failed` with a `TypeError`, and the source is cancelled
 * with that error; in `rest` it errors the stream the same way. `rest` passes
 * each frame through untouched, except a frame backed by a
 * `SharedArrayBuffer`, which is copied so that every chunk is backed by a
 * plain `ArrayBuffer`. Zero-length frames are allowed anywhere.
 *
 * The reader lock is released when the result is `failed`; on `within` the
 * body has ended and stays locked (releasing costs an error object for
 * nothing left to read). On `overflow` the reader belongs to `rest`:
 * reading it to the end leaves the ended source locked (as on `within`),
 * cancelling it cancels the source with the same reason (and releases the
 * lock), and an error of the source errors it (and releases the lock).
 *
 * @param body The stream to read; it must not be locked.
 * @param cap The most bytes to capture: a non-negative safe integer.
 * @param stop Stops the capture when it settles (`unfinished`): for a body
 * that is slow to end.
 * @returns A promise of the {@linkcode CaptureResult}.
 * @throws {RangeError} If `cap` is not a non-negative safe integer (the
 * promise rejects).
 * @throws {TypeError} If `body` is locked (the promise rejects).
 *
 * @example Split a body larger than the cap
 * ```ts
 * import { capture } from "./_capture.ts";
 * import assert from "node:assert/strict";
 *
 * const body = new Response(new Uint8Array([1, 2, 3, 4, 5])).body!;
 * const result = await capture(body, 2);
 * assert.equal(result.outcome, "overflow");
 * if (result.outcome === "overflow") {
 *   assert.deepEqual(result.prefix, new Uint8Array([1, 2]));
 *   const tail = new Uint8Array(await new Response(result.rest).arrayBuffer());
 *   assert.deepEqual(tail, new Uint8Array([3, 4, 5]));
 * }
 * ```
 */
export async function capture(
  body: ReadableStream<Uint8Array>,
  cap: number,
  stop?: Promise<unknown>,
): Promise<CaptureResult> {
  if (!Number.isSafeInteger(cap) || cap < 0) {
    throw new RangeError(
      `'cap' must be a non-negative integer: current value is ${cap}`,
    );
  }
  let reader = body.getReader();
  const frames: Uint8Array[] = [];
  let seen = 0;
  // A stop releases the reader's lock, which rejects the read pending then
  // without taking a frame from the stream (the Streams spec errors pending
  // read requests on release): the next reader gets that frame. So each
  // frame costs one plain read, and the stop one reaction in all, where
  // racing every read against the stop would leave a reaction per frame.
  let stopped = false;
  let finished = false;
  stop?.then(halt, halt);
  function halt(): void {
    if (finished) return;
    try {
      reader.releaseLock();
      stopped = true;
    } catch {
      // A runtime that refuses to release a reader with a read pending:
      // the capture goes on to the body's end or the cap.
    }
  }
  /** The reader to go on with: a fresh one once a stop released the lock. */
  const current = () => stopped ? (reader = body.getReader()) : reader;
  for (;;) {
    let result: ReadableStreamReadResult<Uint8Array>;
    try {
      result = await reader.read();
    } catch (error) {
      finished = true;
      if (stopped) {
        return {
          outcome: "unfinished",
          prefix: concatBytes(frames, seen),
          rest: restOf(current(), undefined),
        };
      }
      reader.releaseLock();
      return { outcome: "failed", prefix: concatBytes(frames, seen), error };
    }
    if (result.done) {
      // The body has ended: its reader is left as it is (releasing it makes
      // a TypeError for the reader's closed promise, and an ended stream has
      // nothing left to read).
      finished = true;
      return { outcome: "within", bytes: whole(frames, seen) };
    }
    const frame: unknown = result.value;
    if (!(frame instanceof Uint8Array)) {
      finished = true;
      const error = notBytes(frame);
      const last = current();
      last.cancel(error).catch(() => {});
      last.releaseLock();
      return { outcome: "failed", prefix: concatBytes(frames, seen), error };
    }
    if (seen + frame.byteLength > cap) {
      finished = true;
      const head = cap - seen;
      frames.push(frame.subarray(0, head));
      return {
        outcome: "overflow",
        prefix: concatBytes(frames, cap),
        rest: restOf(current(), frame.subarray(head)),
      };
    }
    frames.push(frame);
    seen += frame.byteLength;
  }
}

/**
 * The body as one array: the single frame itself when that is safe (a whole,
 * plain, fixed-length buffer, so nothing more is retained and nothing can
 * shrink under it): no copy at all.
 */
function whole(frames: Uint8Array[], length: number): Uint8Array<ArrayBuffer> {
  const only = frames.length === 1 ? frames[0]! : undefined;
  if (
    only !== undefined && only.buffer instanceof ArrayBuffer &&
    !only.buffer.resizable && only.byteOffset === 0 &&
    only.byteLength === only.buffer.byteLength
  ) {
    return only as Uint8Array<ArrayBuffer>;
  }
  return concatBytes(frames, length);
}

/** A frame as a chunk backed by a plain `ArrayBuffer` (copied only if shared). */
function owned(frame: Uint8Array): Uint8Array<ArrayBuffer> {
  return frame.buffer instanceof ArrayBuffer
    ? frame as Uint8Array<ArrayBuffer>
    : frame.slice();
}

function notBytes(chunk: unknown): TypeError {
  const kind = chunk === null
    ? "null"
    : typeof chunk === "object"
    ? chunk.constructor?.name ?? "object"
    : typeof chunk;
  return new TypeError(
    `Body chunks must be Uint8Array: received a chunk of type ${kind}`,
  );
}

/**
 * The stream after the cap: `head` first, then the reader's frames, each read
 * only when the consumer asks (`highWaterMark: 0`).
 */
function restOf(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  head: Uint8Array | undefined,
): ReadableStream<Uint8Array<ArrayBuffer>> {
  let pending: Uint8Array | undefined = head;
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    async pull(controller) {
      if (pending !== undefined) {
        controller.enqueue(owned(pending));
        pending = undefined;
        return;
      }
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        result = await reader.read();
      } catch (error) {
        reader.releaseLock();
        controller.error(error);
        return;
      }
      if (result.done) {
        // The source has ended: as on `within`, its lock stays (releasing
        // costs an error object for nothing left to read).
        controller.close();
        return;
      }
      const frame: unknown = result.value;
      if (!(frame instanceof Uint8Array)) {
        const error = notBytes(frame);
        reader.cancel(error).catch(() => {});
        reader.releaseLock();
        controller.error(error);
        return;
      }
      controller.enqueue(owned(frame));
    },
    async cancel(reason) {
      pending = undefined;
      try {
        await reader.cancel(reason);
      } finally {
        reader.releaseLock();
      }
    },
  }, { highWaterMark: 0 });
}
