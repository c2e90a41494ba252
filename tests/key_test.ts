// Copyright 2026 the @idempotent/http authors. MIT license.
import assert from "node:assert/strict";
import fc from "fast-check";
import { MAX_KEY_LENGTH, parseIdempotencyKey } from "../src/key.ts";

// Printable ASCII but the comma, which no key may hold.
const printable = (from: number) =>
  fc.integer({ min: from, max: 0x7e }).filter((c) => c !== 0x2c).map((c) =>
    String.fromCharCode(c)
  );
const bareKey = fc.string({
  unit: printable(0x21),
  minLength: 1,
  maxLength: MAX_KEY_LENGTH,
})
  .filter((s) => !s.startsWith('"'));
const anyKey = fc.string({
  unit: printable(0x20),
  minLength: 1,
  maxLength: MAX_KEY_LENGTH,
});

/** Writes a key as an RFC 8941 sf-string. */
function sfString(key: string): string {
  return `"${key.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

Deno.test("parseIdempotencyKey() reads every bare key of printable ASCII as itself", () => {
  fc.assert(fc.property(bareKey, (key) => {
    assert.deepEqual(parseIdempotencyKey(key), { ok: true, key });
  }));
});

Deno.test("parseIdempotencyKey() reads every key written as an sf-string back, the same key as its bare form", () => {
  fc.assert(fc.property(anyKey, fc.constantFrom("", " ", "\t"), (key, pad) => {
    assert.deepEqual(parseIdempotencyKey(`${pad}${sfString(key)}${pad}`), {
      ok: true,
      key,
    });
    const bare = parseIdempotencyKey(key);
    // A bare value loses surrounding spaces, as HTTP field values do; one
    // that then starts with a quote is read as an sf-string, not as itself.
    const trimmed = key.replace(/^ +| +$/g, "");
    if (bare.ok && !trimmed.startsWith('"')) assert.equal(bare.key, trimmed);
  }));
});

Deno.test("parseIdempotencyKey() refuses a comma in either form, so two header lines joined by Headers never make one key", () => {
  for (const value of ["k,", "a,b", '", "', '","', ",", '"a,b"']) {
    const parsed = parseIdempotencyKey(value);
    assert.equal(parsed.ok, false, value);
    assert.match(!parsed.ok ? parsed.reason : "", /comma/);
  }
  // What `Headers` makes of two lines, each well formed or not.
  fc.assert(fc.property(anyKey, anyKey, (a, b) => {
    const headers = new Headers();
    headers.append("idempotency-key", a);
    headers.append("idempotency-key", b);
    assert.equal(
      parseIdempotencyKey(headers.get("idempotency-key")!).ok,
      false,
    );
    headers.set("idempotency-key", sfString(a));
    headers.append("idempotency-key", sfString(b));
    assert.equal(
      parseIdempotencyKey(headers.get("idempotency-key")!).ok,
      false,
    );
  }));
});

Deno.test("parseIdempotencyKey() refuses keys longer than 255 characters in either form", () => {
  fc.assert(
    fc.property(
      fc.string({ unit: printable(0x21), minLength: 256, maxLength: 600 }),
      (long) => {
        const key = long.replace(/^"/, "a");
        assert.equal(parseIdempotencyKey(key).ok, false);
        assert.equal(parseIdempotencyKey(sfString(key)).ok, false);
      },
    ),
  );
});

Deno.test("parseIdempotencyKey() refuses anything outside printable ASCII and never throws", () => {
  fc.assert(
    fc.property(fc.string({ unit: "binary", maxLength: 300 }), (value) => {
      const parsed = parseIdempotencyKey(value);
      if (parsed.ok) {
        assert.ok(
          /^[\x20-\x7e]{1,255}$/.test(parsed.key),
          JSON.stringify(parsed.key),
        );
        assert.ok(/^[ \t]*[\x20-\x7e]+[ \t]*$/.test(value));
      } else {
        assert.equal(typeof parsed.reason, "string");
      }
    }),
    { numRuns: 2000 },
  );
});

Deno.test("parseIdempotencyKey() says why a key is malformed", () => {
  const cases: [string, RegExp][] = [
    ["", /empty/],
    ['""', /empty/],
    ['"abc', /no closing quote/],
    ['"a"b', /followed by more text/],
    ['"a";p=1', /followed by more text/],
    ['"a\\nb"', /escape/],
    ["caf\u00e9", /a character beyond ASCII at position 4/],
    ["a b", /a space at position 2: quote the key/],
    ["a\x7fb", /a control character at position 2/],
    ['"a\u00e9"', /quoted key has a control character or one beyond ASCII/],
    ["x".repeat(256), /256 characters long/],
  ];
  for (const [value, reason] of cases) {
    const parsed = parseIdempotencyKey(value);
    assert.equal(parsed.ok, false, value);
    if (!parsed.ok) assert.match(parsed.reason, reason);
  }
});

Deno.test("parseIdempotencyKey() takes a bare key of 254 and 255 characters, whitespace around or not, and refuses 256", () => {
  for (const length of [254, 255, 256]) {
    const key = "k".repeat(length);
    for (const value of [key, ` ${key}`, `${key}\t`, ` \t${key} \t `]) {
      const parsed = parseIdempotencyKey(value);
      if (length <= MAX_KEY_LENGTH) {
        assert.deepEqual(parsed, { ok: true, key }, `${length} in ${value}`);
      } else {
        assert.deepEqual(parsed, {
          ok: false,
          reason: "the key is 256 characters long; at most 255 are accepted",
        });
      }
    }
  }
});

Deno.test("parseIdempotencyKey() counts a quoted key's characters, not its quotes or escapes: 254 and 255 taken, 256 refused", () => {
  for (const length of [254, 255, 256]) {
    // Escapes (`\"`, `\\`) make the text longer than the key.
    const key = `"\\${"q".repeat(length - 2)}`;
    const value = ` ${sfString(key)}\t`;
    const parsed = parseIdempotencyKey(value);
    if (length <= MAX_KEY_LENGTH) {
      assert.deepEqual(parsed, { ok: true, key }, `${length}`);
    } else {
      assert.deepEqual(parsed, {
        ok: false,
        reason: "the key is 256 characters long; at most 255 are accepted",
      });
    }
  }
});
