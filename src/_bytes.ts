// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Joining byte chunks: one copy into an exact-size buffer.
 *
 * @module
 */

/**
 * Copies `chunks`, whose lengths add up to `length`, into one new array.
 *
 * @param chunks The chunks, in order.
 * @param length Their total length.
 * @returns One contiguous array.
 */
export function concatBytes(
  chunks: readonly Uint8Array[],
  length: number,
): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
