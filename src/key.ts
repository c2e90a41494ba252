// Copyright 2026 the @idempotent/http authors. MIT license.
/** Parsing the `Idempotency-Key` header. @module */

/** The longest key accepted, in characters. */
export const MAX_KEY_LENGTH = 255;

/** The key {@linkcode parseIdempotencyKey} read, or why it is malformed. */
export type ParsedKey =
  | { ok: true; key: string }
  | { ok: false; reason: string };

/**
 * Reads an `Idempotency-Key` header value: an RFC 8941 sf-string (`"abc"`,
 * escapes `\"` and `\\` only) or a bare value (`abc`) name the same key, 1
 * to 255 characters of visible ASCII (0x21–0x7E) without a comma (repeated
 * header lines are joined with commas); a quoted key may hold spaces too.
 * Surrounding spaces and tabs are ignored.
 *
 * @example Both spellings name one key
 * ```ts
 * import { parseIdempotencyKey } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseIdempotencyKey('"order-42"'), { ok: true, key: "order-42" });
 * assert.deepEqual(parseIdempotencyKey("order-42"), { ok: true, key: "order-42" });
 * assert.equal(parseIdempotencyKey("").ok, false);
 * assert.equal(parseIdempotencyKey('"a"; x=1').ok, false);
 * ```
 */
export function parseIdempotencyKey(value: string): ParsedKey {
  let start = 0;
  let end = value.length;
  while (start < end && isSpace(value.charCodeAt(start))) start++;
  while (end > start && isSpace(value.charCodeAt(end - 1))) end--;
  if (start === end) return bad("the key is empty");
  if (value.charCodeAt(start) === 0x22) return parseString(value, start, end);
  for (let i = start; i < end; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x2c) return COMMA;
    if (c < 0x21 || c > 0x7e) {
      const at = i - start + 1;
      const what = c === 0x20
        ? `a space at position ${at}: quote the key ("a b") to hold one`
        : `${
          c < 0x20 || c === 0x7f
            ? "a control character"
            : "a character beyond ASCII"
        } at position ${at}`;
      return bad(
        `the key has ${what}; a bare key is visible ASCII (0x21–0x7E) but a comma`,
      );
    }
  }
  if (end - start > MAX_KEY_LENGTH) return tooLong(end - start);
  return {
    ok: true,
    key: start === 0 && end === value.length ? value : value.slice(start, end),
  };
}

/** Two header lines `k` and `""` would read as the key `k,`: no comma, then. */
const COMMA = bad(
  "the key has a comma (repeated header lines are joined with commas, so a key may not contain one)",
);

function parseString(value: string, start: number, end: number): ParsedKey {
  let key = "";
  let from = start + 1;
  for (let i = start + 1; i < end; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x22) {
      if (i !== end - 1) {
        return bad(
          "the quoted key is followed by more text (parameters are not accepted)",
        );
      }
      key += value.slice(from, i);
      if (key.length === 0) return bad("the key is empty");
      if (key.length > MAX_KEY_LENGTH) return tooLong(key.length);
      return { ok: true, key };
    }
    if (c === 0x5c) {
      const next = value.charCodeAt(i + 1);
      if (next !== 0x22 && next !== 0x5c) {
        return bad('the quoted key has an escape other than \\" or \\\\');
      }
      key += value.slice(from, i);
      from = i + 1;
      i++;
      continue;
    }
    if (c === 0x2c) return COMMA;
    if (c < 0x20 || c > 0x7e) {
      return bad(
        "the quoted key has a control character or one beyond ASCII: a quoted key is printable ASCII (0x20–0x7E) but a comma",
      );
    }
  }
  return bad("the quoted key has no closing quote");
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

function tooLong(length: number): ParsedKey {
  return bad(
    `the key is ${length} characters long; at most ${MAX_KEY_LENGTH} are accepted`,
  );
}

function bad(reason: string): ParsedKey {
  return { ok: false, reason };
}
