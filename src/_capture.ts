// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Reads a response body up to a size cap (docs/architecture.md, The request's
 * way, step 7). @module
 */

import { concatBytes } from "./_bytes.ts";

/**
 * What {@linkcode capture} found: `within` (the whole body), `overflow`
 * (`cap` bytes, then the rest uncopied, read lazily), `failed` (an error or a
 * chunk that is not bytes, before the cap) or `unfinished` (`stop` settled:
 * the bytes so far, then the rest, the pending read included).
 */
type CaptureResult =
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
 * Reads `body` until its end, or past `cap` bytes, or until `stop` settles.
 * Frames are held by reference and copied once (a single whole plain frame
 * not at all). An ended body stays locked: releasing costs an error object.
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
  // A stop releases the lock: the pending read rejects without taking a
  // frame, which the next reader gets. One reaction in all, not one a frame.
  let stopped = false;
  let finished = false;
  stop?.then(halt, halt);
  function halt(): void {
    if (finished) return;
    try {
      reader.releaseLock();
      stopped = true;
    } catch {
      // A runtime that refuses: the capture goes on to the end or the cap.
    }
  }
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

/** The body as one array: the single frame itself when it is a whole fixed buffer. */
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

/** A frame backed by a plain `ArrayBuffer` (copied only if shared). */
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

/** `head`, then the reader's frames, each read only when asked for. */
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
