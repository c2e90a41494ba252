// Copyright 2026 the @idempotent/http authors. MIT license.
/** A body's JSON value in RFC 8785 (JCS) form (docs/architecture.md, JSON fingerprints). @module */

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const ENCODER = new TextEncoder();
/** From here on a double no longer holds every integer: 2⁵³ + 1 reads as 2⁵³. */
const EXACT_BELOW = 2 ** 53;
/** A JSON text's strings and numbers: `[1]` a fraction, `[2]` an exponent. */
const TOKENS = /"(?:[^"\\]|\\.)*"|-?\d+(\.\d+)?([eE][-+]?\d+)?/g;

/** Whether the value being written holds a number of magnitude 2⁵³ or more. */
let big = false;

/**
 * The body's JSON value, canonical (RFC 8785) as UTF-8, or `undefined` when
 * that would lose what tells two bodies apart: not UTF-8, not JSON, a number
 * past a double's range, an integer literal a double does not hold exactly,
 * nesting deeper than the stack.
 */
export function canonicalJson(
  body: Uint8Array,
): Uint8Array<ArrayBuffer> | undefined {
  try {
    const text = UTF8.decode(body);
    big = false;
    const json = canonical(JSON.parse(text));
    if (json === undefined || (big && !exactIntegers(text))) return undefined;
    return ENCODER.encode(json);
  } catch {
    return undefined;
  }
}

/** `JSON.stringify`'s strings and numbers are RFC 8785's; keys by UTF-16 code units. */
function canonical(value: unknown): string | undefined {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return undefined;
    if (Math.abs(value) >= EXACT_BELOW) big = true;
    return JSON.stringify(value);
  }
  if (typeof value !== "object" || value === null) return JSON.stringify(value);
  const array = Array.isArray(value);
  const keys = array ? undefined : Object.keys(value).sort();
  const count = keys?.length ?? (value as unknown[]).length;
  let out = "";
  for (let i = 0; i < count; i++) {
    const key = keys?.[i];
    const item = canonical((value as Record<string, unknown>)[key ?? i]);
    if (item === undefined) return undefined;
    out += `${i === 0 ? "" : ","}${
      key === undefined ? "" : `${JSON.stringify(key)}:`
    }${item}`;
  }
  return array ? `[${out}]` : `{${out}}`;
}

/** Whether every integer literal of a JSON text (no fraction, no exponent) reads exactly. */
function exactIntegers(text: string): boolean {
  for (const [token, fraction, exponent] of text.matchAll(TOKENS)) {
    if (token[0] === '"' || fraction || exponent) continue;
    if (BigInt(token) !== BigInt(Number(token))) return false;
  }
  return true;
}
