// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Joining byte chunks: one copy into an exact-size buffer.
 *
 * @module
 */

/**
 * Copies `chunks`, whose lengths add up to `length`, into one new array.
 *
 * A single chunk of that length is copied by the typed-array constructor,
 * which fills its new buffer straight from the chunk instead of zeroing it
 * first and copying over the zeros: 0.87–0.94× the time of `new Uint8Array`
 * then `set` for 1 MiB in a loop of copies alone on Deno 2.9; inside a
 * capture (the prefix of an oversized frame) the gain is within the noise,
 * the first writes to a fresh buffer costing the same either way.
 *
 * @param chunks The chunks, in order.
 * @param length Their total length.
 * @returns One contiguous array.
 */
export function concatBytes(
  chunks: readonly Uint8Array[],
  length: number,
): Uint8Array<ArrayBuffer> {
  const only = chunks.length === 1 ? chunks[0]! : undefined;
  if (only !== undefined && only.byteLength === length) {
    return new Uint8Array(only);
  }
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
