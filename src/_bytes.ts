// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Joining byte chunks (one copy into an exact-size buffer), and handing
 * bytes to `Request` and `Response` at least cost.
 *
 * @module
 */

/**
 * Copies `chunks`, whose lengths add up to `length`, into one new array.
 *
 * A single chunk of that length is copied by the typed-array constructor,
 * which fills its new buffer straight from the chunk instead of zeroing it
 * first and copying over the zeros.
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

/** Bodies up to this many bytes may be handed to `Response` or `Request` as text (see {@linkcode bodyInit}). */
const TEXT_BODY_BYTES = 1024;

/**
 * A body as `new Response()` and `new Request()` take it at least cost, the
 * same bytes either way: a small ASCII body as text when the headers have a
 * `Content-Type` (text without one would gain `text/plain;charset=UTF-8`),
 * else the bytes. Both copy an array into a buffer of their own, and under
 * `Deno.serve` that buffer was the largest single cost of a replay (a tenth
 * of its CPU time); text is kept as it is, and ASCII encodes to itself.
 *
 * @param bytes The body.
 * @param typed Whether the headers it goes with hold a `Content-Type`.
 * @returns The body to construct the response or request with.
 */
export function bodyInit(
  bytes: Uint8Array<ArrayBuffer>,
  typed: boolean,
): Uint8Array<ArrayBuffer> | string {
  const length = bytes.byteLength;
  if (!typed || length === 0 || length > TEXT_BODY_BYTES) return bytes;
  for (let i = 0; i < length; i++) if (bytes[i]! >= 0x80) return bytes;
  return String.fromCharCode.apply(null, bytes as unknown as number[]);
}
