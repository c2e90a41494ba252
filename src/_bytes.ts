// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Joining byte chunks, and handing bytes to `Request` and `Response`. @module
 */

/** An empty body, shared. */
export const EMPTY: Uint8Array<ArrayBuffer> = new Uint8Array(0);

/** `chunks` (of `length` bytes in all) copied into one new array. */
export function concatBytes(
  chunks: readonly Uint8Array[],
  length: number,
): Uint8Array<ArrayBuffer> {
  const only = chunks.length === 1 ? chunks[0]! : undefined;
  if (only !== undefined && only.byteLength === length) {
    return new Uint8Array(only); // No zeroing first.
  }
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

const TEXT_BODY_BYTES = 1024;

/**
 * A small ASCII body as text (kept as it is, where bytes are copied), when
 * the headers are `typed` (else text would gain `text/plain`); else the bytes.
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

/** Deno's keys to the internal state of a `Request` and a `Response`. */
const KEYS = new Map<string, symbol | null>();

/** Deno's internal state of `value`, under its `name` key; `undefined` elsewhere. */
export function denoState(
  value: Request | Response,
  name: "request" | "response",
): unknown {
  let key = KEYS.get(name);
  if (key === undefined) {
    key = Object.getOwnPropertySymbols(value).find((symbol) =>
      symbol.description === name
    ) ?? null;
    KEYS.set(name, key);
  }
  return key === null
    ? undefined
    : (value as unknown as Record<symbol, unknown>)[key];
}
