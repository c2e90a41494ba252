// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `jsonFingerprint` (src/fingerprint.ts, src/_jcs.ts): RFC 8785's published
 * examples (§3.2.2's sample, §3.2.3's sort, Appendix B's numbers), a
 * fast-check property over JSON values written anew (reordered keys,
 * re-spelled numbers, `\uXXXX` escapes, spacing, nesting: one fingerprint, a
 * replay through the middleware; a changed value: another, 422), and each
 * edge it decides: not JSON or not UTF-8 (the bytes), duplicate keys (the
 * last), integers past 2⁵³ (the bytes unless exact), lone surrogates (their
 * escape), nesting past the stack (the bytes), `null` ≠ absent, a `secret`.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { idempotency, jsonFingerprint, MemoryStore, slotOf } from "../mod.ts";
import { canonicalJson } from "../src/_jcs.ts";
import { requestFingerprint } from "../src/fingerprint.ts";
import { post } from "./_support/http.ts";
import { counting } from "./_support/idempotency.ts";

const encoder = new TextEncoder();
const SECRET = "a secret of 32 bytes at least...";
const URL_ = "http://api.test/payments?x=1";
const request = new Request(URL_, { method: "post" });

/** The canonical text of a body, or `undefined` (its bytes are hashed). */
function canonical(text: string): string | undefined {
  const bytes = canonicalJson(encoder.encode(text));
  return bytes && new TextDecoder().decode(bytes);
}

function fingerprint(text: string | Uint8Array, secret?: string) {
  const body = typeof text === "string" ? encoder.encode(text) : text;
  return jsonFingerprint(request, body, secret ? { secret } : {});
}

Deno.test("RFC 8785 §3.2.2: the sample object's canonical form, and its fingerprint that of those bytes", async () => {
  const input = String.raw`{
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
    "literals": [null, true, false]
  }`;
  const output = String
    .raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`;
  assert.equal(canonical(input), output);
  assert.equal(
    await fingerprint(input),
    await requestFingerprint("POST", URL_, encoder.encode(output)),
  );
});

Deno.test("RFC 8785 §3.2.3: members sort by UTF-16 code units, a surrogate pair before U+FB33", () => {
  const input = String.raw`{
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\ud83d\ude00": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis"
  }`;
  assert.equal(
    canonical(input),
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  );
  // §3.2.4: as UTF-8, the Control key is C2 80 and the emoji F0 9F 98 80.
  const bytes = canonicalJson(encoder.encode(input))!;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
  assert.match(hex, /^7b225c72223a/); // {"\r":
  assert.ok(hex.includes("22c280223a"));
  assert.ok(hex.includes("22f09f9880223a"));
});

Deno.test("RFC 8785 Appendix B: each IEEE 754 value is written as the table says, in any spelling", () => {
  const table: [string, string][] = [
    ["0000000000000000", "0"],
    ["8000000000000000", "0"],
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ];
  for (const [hex, want] of table) {
    const view = new DataView(new ArrayBuffer(8));
    view.setBigUint64(0, BigInt(`0x${hex}`));
    const value = view.getFloat64(0);
    // 17 significant digits: exact, and never the canonical spelling.
    assert.equal(canonical(`[${value.toExponential(16)}]`), `[${want}]`, hex);
  }
  // NaN and Infinity have no JSON form; 1e400 reads as Infinity: the bytes.
  assert.equal(canonical("[1e400]"), undefined);
  assert.equal(canonical("[-1e400]"), undefined);
});

/** A JSON value whose numbers a double holds exactly (integers below 2⁵³). */
const jsonValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((
  tie,
) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer({ min: -(2 ** 53) + 1, max: 2 ** 53 - 1 }),
    fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e15, max: 1e15 }),
    fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e-3, max: 1e-3 }),
    fc.string({ unit: "binary" }),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.string({ unit: "binary", maxLength: 4 }), tie("value"), {
      maxKeys: 4,
      noNullPrototype: true,
    }),
  ),
})).value;

/** The choices one re-spelling makes, drawn per call. */
type Pick = (n: number) => number;

/** `value` written as JSON another way: keys shuffled, spacing, numbers and strings re-spelled. */
function respell(value: unknown, pick: Pick): string {
  const space = () => [" ", "", "\n\t", "  "][pick(4)]!;
  if (typeof value === "number") {
    const spellings = [
      JSON.stringify(value),
      value.toExponential(),
      value.toExponential().replace("e+", "E"),
    ];
    if (Number.isInteger(value) && Math.abs(value) < 1e21) {
      spellings.push(`${JSON.stringify(value)}.0`, `${value}e0`);
    }
    return spellings[pick(spellings.length)]!;
  }
  if (typeof value === "string") {
    let out = '"';
    for (let i = 0; i < value.length; i++) {
      const unit = value.charCodeAt(i);
      const hex = unit.toString(16).padStart(4, "0");
      out += pick(2) === 0
        ? `\\u${pick(2) ? hex : hex.toUpperCase()}`
        : JSON.stringify(value[i]!).slice(1, -1);
    }
    return `${out}"`;
  }
  if (typeof value !== "object" || value === null) return JSON.stringify(value);
  if (Array.isArray(value)) {
    return `[${space()}${
      value.map((v) => respell(v, pick)).join(`,${space()}`)
    }]`;
  }
  const keys = Object.keys(value);
  for (let i = keys.length - 1; i > 0; i--) {
    const j = pick(i + 1);
    [keys[i], keys[j]] = [keys[j]!, keys[i]!];
  }
  const members = keys.map((k) =>
    `${respell(k, pick)}${space()}:${space()}${
      respell((value as Record<string, unknown>)[k], pick)
    }`
  );
  return `{${space()}${members.join(`,${space()}`)}${space()}}`;
}

/** `value` with one leaf changed (or one member dropped, or `null` for absent). */
function changed(value: unknown, at: number): unknown {
  if (typeof value === "number") return value === 0 ? 1 : -value * 2 + 1;
  if (typeof value === "string") return `${value}x`;
  if (typeof value === "boolean") return !value;
  if (value === null) return 0;
  if (Array.isArray(value)) {
    if (value.length === 0) return [null];
    const i = at % value.length;
    return value.map((v, j) => j === i ? changed(v, at) : v);
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 0) return { "": null };
  const key = keys[at % keys.length]!;
  const copy = { ...record };
  if (at % 3 === 0) copy[key] = changed(record[key], at);
  else if (at % 3 === 1) delete copy[key];
  else {
    let absent = `${key}_`;
    while (absent in record) absent += "_";
    copy[absent] = null; // null where nothing was
  }
  return copy;
}

const picks = fc.infiniteStream(fc.nat()).map((stream) => {
  const it = stream[Symbol.iterator]();
  return (n: number) => it.next().value! % n;
});

Deno.test("property: a JSON value written anew has one fingerprint; a changed value another", async () => {
  await fc.assert(
    fc.asyncProperty(jsonValue, picks, fc.nat(), async (value, pick, at) => {
      const first = JSON.stringify(value);
      const again = respell(value, pick);
      assert.equal(canonical(again), canonical(first), again);
      assert.equal(await fingerprint(again), await fingerprint(first));
      const other = JSON.stringify(changed(value, at));
      assert.notEqual(await fingerprint(other), await fingerprint(first));
    }),
    { numRuns: 300 },
  );
});

Deno.test("property: through the middleware, a body written anew replays and a changed value is 422", async () => {
  const { state, handler } = counting((_, n) =>
    new Response(`run ${n}`, { status: 201 })
  );
  const guarded = idempotency(handler, {
    scope: "global",
    fingerprint: jsonFingerprint,
  });
  let key = 0;
  await fc.assert(
    fc.asyncProperty(jsonValue, picks, fc.nat(), async (value, pick, at) => {
      const k = `jcs-${++key}`;
      const before = state.runs;
      const first = await guarded(post(k, JSON.stringify(value)));
      assert.equal(first.status, 201);
      const retry = await guarded(post(k, respell(value, pick)));
      assert.equal(retry.headers.get("idempotent-replayed"), "true");
      assert.equal(await retry.text(), await first.text());
      const other = await guarded(post(k, JSON.stringify(changed(value, at))));
      await other.body?.cancel();
      assert.equal(other.status, 422);
      assert.equal(state.runs, before + 1);
    }),
    { numRuns: 100 },
  );
});

Deno.test('jsonFingerprint: null is not absent, nor [] {}, nor "1" 1, and array order counts', async () => {
  const distinct = [
    '{"a":null}',
    "{}",
    "[]",
    '"1"',
    "1",
    "[1,2]",
    "[2,1]",
    '{"a":{}}',
    '{"a":[]}',
    "true",
    '"true"',
  ];
  const prints = await Promise.all(distinct.map((t) => fingerprint(t)));
  assert.equal(new Set(prints).size, distinct.length);
  // Numbers by value: 1.0, 1, 1e0, 10e-1, -0 and 0.
  assert.equal(await fingerprint("1.0"), await fingerprint("1"));
  assert.equal(await fingerprint("10e-1"), await fingerprint("1e0"));
  assert.equal(await fingerprint("-0"), await fingerprint("0"));
  assert.equal(await fingerprint('"\\u0041"'), await fingerprint('"A"'));
});

Deno.test("jsonFingerprint: a body that is not JSON, or not UTF-8, is fingerprinted by its bytes", async () => {
  for (
    const body of [
      "amount=100",
      "",
      "{",
      '{"a":1,}',
      "NaN",
      "'a'",
      "[1] [2]",
    ]
  ) {
    const bytes = encoder.encode(body);
    assert.equal(canonical(body), undefined, body);
    assert.equal(
      await fingerprint(bytes),
      await requestFingerprint("POST", URL_, bytes),
    );
  }
  // Two invalid UTF-8 bodies that a lenient decoder reads alike stay apart.
  const a = new Uint8Array([0x22, 0xff, 0x22]);
  const b = new Uint8Array([0x22, 0xfe, 0x22]);
  assert.equal(canonicalJson(a), undefined);
  assert.notEqual(await fingerprint(a), await fingerprint(b));
  // A BOM is dropped, as `req.json()` drops it.
  assert.equal(await fingerprint("\ufeff[1]"), await fingerprint("[1]"));
});

Deno.test("jsonFingerprint: duplicate keys count as JSON.parse reads them, the last", async () => {
  assert.equal(canonical('{"a":1,"a":2}'), '{"a":2}');
  assert.equal(
    await fingerprint('{"a":1,"a":2}'),
    await fingerprint('{"a":2}'),
  );
  assert.notEqual(
    await fingerprint('{"a":1,"a":2}'),
    await fingerprint('{"a":1}'),
  );
  assert.equal(canonical('{"__proto__":1}'), '{"__proto__":1}');
});

Deno.test("jsonFingerprint: an integer literal is canonical up to 2⁵³ and past it while exact, else the bytes", async () => {
  const limit = 2 ** 53; // 9007199254740992
  assert.equal(canonical(`[${limit - 1}]`), `[${limit - 1}]`);
  assert.equal(canonical(`[${limit}]`), `[${limit}]`); // exact
  assert.equal(canonical("[9007199254740993]"), undefined); // reads as 2⁵³
  assert.equal(canonical("[-9007199254740993]"), undefined);
  assert.equal(canonical('{"id":12345678901234567000}'), undefined);
  // So two ids a double cannot tell apart stay apart.
  assert.notEqual(
    await fingerprint('{"id":1234567890123456789}'),
    await fingerprint('{"id":1234567890123456790}'),
  );
  // As strings, or written with an exponent or a fraction, they are values.
  assert.equal(
    canonical('{"id":"12345678901234567890","n":1E30,"f":9007199254740993.0}'),
    '{"f":9007199254740992,"id":"12345678901234567890","n":1e+30}',
  );
  // A long digit run inside a string is not a number.
  assert.equal(
    canonical('["9007199254740993", 9007199254740992]'),
    '["9007199254740993",9007199254740992]',
  );
});

Deno.test("jsonFingerprint: a lone surrogate is kept as its \\uXXXX escape, apart from U+FFFD", async () => {
  assert.equal(canonical('"\\ud800"'), '"\\ud800"');
  assert.equal(canonical('{"\\udc00":1}'), '{"\\udc00":1}');
  assert.notEqual(
    await fingerprint('"\\ud800"'),
    await fingerprint('"\\ufffd"'),
  );
  assert.notEqual(
    await fingerprint('"\\ud800"'),
    await fingerprint('"\\udbff"'),
  );
  assert.equal(await fingerprint('"\\uD800"'), await fingerprint('"\\ud800"'));
});

Deno.test("jsonFingerprint: nesting deeper than the stack is fingerprinted by its bytes, never a throw", async () => {
  const deep = `${"[".repeat(500_000)}${"]".repeat(500_000)}`;
  assert.equal(canonical(deep), undefined);
  const bytes = encoder.encode(deep);
  assert.equal(
    await fingerprint(bytes),
    await requestFingerprint("POST", URL_, bytes),
  );
});

Deno.test("jsonFingerprint: under a secret, HMAC as requestFingerprint's; the middleware stores the same", async () => {
  const body = '{ "b": [1.0], "a": "x" }';
  const canonicalBytes = encoder.encode('{"a":"x","b":[1]}');
  const large = JSON.stringify({ pad: "p".repeat(10_000), a: 1 });
  for (const text of [body, large]) {
    const keyed = await fingerprint(text, SECRET);
    assert.notEqual(keyed, await fingerprint(text));
    assert.equal(
      keyed,
      await requestFingerprint(
        "POST",
        URL_,
        canonicalJson(encoder.encode(text))!,
        { secret: SECRET },
      ),
    );
  }
  assert.equal(
    await fingerprint(body),
    await requestFingerprint("POST", URL_, canonicalBytes),
  );
  const store = new MemoryStore();
  const guarded = idempotency(() => new Response("ok"), {
    scope: "global",
    store,
    secret: SECRET,
    fingerprint: jsonFingerprint,
  });
  const path = "/payments?x=1";
  await (await guarded(post("k1", body, { path }))).text();
  const found = await store.claim(slotOf("", "k1", { secret: SECRET }), {
    fingerprint: "",
    leaseMs: 1_000,
    ttlMs: 60_000,
  });
  assert.equal(found.state, "completed");
  assert.equal(
    found.state === "completed" && found.fingerprint,
    await fingerprint(body, SECRET),
  );
});

Deno.test("jsonFingerprint: a retry across the switch from requestFingerprint replays a canonical or non-JSON body", async () => {
  const store = new MemoryStore();
  const { state, handler } = counting((_, n) => new Response(`run ${n}`));
  const before = idempotency(handler, { scope: "global", store });
  const after = idempotency(handler, {
    scope: "global",
    store,
    fingerprint: jsonFingerprint,
  });
  for (const [key, body] of [["c", '{"a":1}'], ["t", "amount=1"]]) {
    await (await before(post(key!, body))).text();
    const retry = await after(post(key!, body));
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    await retry.body?.cancel();
  }
  assert.equal(state.runs, 2);
});
