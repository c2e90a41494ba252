// Copyright 2026 the @idempotent/http authors. MIT license.
/** Bytes in tests: patterned bodies, frame splits, comparing and reading bodies. @module */

/** Deterministic bytes. */
export function pattern(length: number, seed = 1): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let x = seed * 2654435761 >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Whether two byte arrays are equal. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A body stream of the given frames, pulled one at a time, that may error after some of them. */
export function frames(
  parts: Uint8Array<ArrayBuffer>[],
  options: {
    errorAfter?: number;
    error?: unknown;
    onCancel?: (reason: unknown) => void;
    gate?: Promise<void>;
  } = {},
): ReadableStream<Uint8Array<ArrayBuffer>> {
  let i = 0;
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    async pull(controller) {
      if (i === 0 && options.gate) await options.gate;
      if (options.errorAfter !== undefined && i === options.errorAfter) {
        controller.error(options.error ?? new Error("body failed"));
        return;
      }
      const part = parts[i++];
      if (part === undefined) controller.close();
      else controller.enqueue(part);
    },
    cancel(reason) {
      options.onCancel?.(reason);
    },
  }, { highWaterMark: 0 });
}

/** Reads a response body to the end. */
export async function bytesOf(response: Response): Promise<Uint8Array> {
  return new Uint8Array(await response.arrayBuffer());
}
