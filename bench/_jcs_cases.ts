// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What bench/jcs_compare.ts runs on each runtime: the two RFC 8785
 * canonicalisers, the local one (`src/_jcs.ts`) and the npm `canonicalize`
 * package, on RFC 8785's published examples and the edges `jsonFingerprint`
 * decides, then (where the runtime's clock moves while code runs) their speed
 * as ratios measured in the same run. Web platform only.
 *
 * @module
 */

import canonicalize from "canonicalize";
import { canonicalJson } from "../src/_jcs.ts";
import { jsonFingerprint, requestFingerprint } from "../mod.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** The local canonicaliser: text in, canonical text or `undefined` out. */
function local(text: string): string | undefined {
  const bytes = canonicalJson(encoder.encode(text));
  return bytes && new TextDecoder().decode(bytes);
}

/** The package, as `jsonFingerprint` would call it: a throw is `undefined`. */
function npm(text: string): string | undefined {
  try {
    return canonicalize(JSON.parse(decoder.decode(encoder.encode(text))));
  } catch {
    return undefined;
  }
}

function double(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

/** RFC 8785's examples (§3.2.2, §3.2.3, Appendix B), as [input, output]. */
const RFC: [string, string][] = [
  [
    String
      .raw`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
    // As escapes: Bun's String.raw reads a non-ASCII character otherwise.
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
  ],
  [
    String
      .raw`{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}`,
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  ],
  ...[
    ["0000000000000000", "0"],
    ["8000000000000000", "0"],
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ].map(([hex, out]): [string, string] => [
    `[${double(hex!).toExponential(16)}]`,
    `[${out}]`,
  ]),
];

/** The edges where `jsonFingerprint` decides: what each canonicaliser gives. */
const EDGES: Record<string, string> = {
  "lone surrogate": '"\\ud800"',
  "integer past 2^53": "[9007199254740993]",
  "1e400": "[1e400]",
  "duplicate keys": '{"a":1,"a":2}',
  "deep nesting": `${"[".repeat(200_000)}${"]".repeat(200_000)}`,
};

/** One runtime's findings. */
export interface Findings {
  /** RFC examples passed, of how many, by canonicaliser. */
  rfc: { local: number; npm: number; of: number; failed: string[] };
  /** Each edge's outcome by canonicaliser (`bytes`: no canonical form). */
  edges: Record<string, { local: string; npm: string }>;
  /** Timing ratios, or why there are none. */
  speed: Record<string, number> | string;
}

const payment = JSON.stringify({
  amount: 1999,
  currency: "eur",
  customer: "cus_9s6XKzkNRiz8i3",
  description: "Order #1042",
  metadata: { order_id: "1042", channel: "web" },
  payment_method_types: ["card"],
});
function sized(bytes: number): string {
  const items = [];
  for (let i = 0; JSON.stringify(items).length < bytes; i++) {
    items.push({ sku: `sku-${i}`, qty: i % 7, price: i * 1.25, note: "é€" });
  }
  return JSON.stringify({ order: "o-1", items });
}
const BODIES: Record<string, string> = {
  "payment (~200 B)": payment,
  "order (~8 KiB)": sized(8 << 10),
  "order (~256 KiB)": sized(256 << 10),
};

/** Median time of `rounds` runs of `fn` `n` times, in ms. */
async function median(
  fn: () => unknown,
  n: number,
  rounds: number,
): Promise<number> {
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const start = performance.now();
    for (let i = 0; i < n; i++) await fn();
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b)[rounds >> 1]!;
}

/** Whether `performance.now()` ticks finer than 0.1 ms (workerd's does not, by design). */
function clockMoves(): boolean {
  const start = performance.now();
  for (let i = 0; i < 1e7; i++) {
    const now = performance.now();
    if (now !== start) return now - start < 0.1;
  }
  return false;
}

/** Runs the checks and, where the clock moves, the speed ratios. */
export async function findings(): Promise<Findings> {
  const rfc = { local: 0, npm: 0, of: RFC.length, failed: [] as string[] };
  for (const [input, output] of RFC) {
    const [a, b] = [local(input), npm(input)];
    if (a === output) rfc.local++;
    if (b === output) rfc.npm++;
    if (a !== output || b !== output) {
      rfc.failed.push(`${input.slice(0, 40)}: ${a} / ${b}`);
    }
  }
  const edges: Findings["edges"] = {};
  for (const [name, input] of Object.entries(EDGES)) {
    edges[name] = {
      local: local(input)?.slice(0, 24) ?? "bytes",
      npm: npm(input)?.slice(0, 24) ?? "bytes",
    };
  }
  if (!clockMoves()) {
    return { rfc, edges, speed: "the clock is coarse while code runs" };
  }
  const speed: Record<string, number> = {};
  const request = new Request("http://api.test/pay", { method: "POST" });
  for (const [name, text] of Object.entries(BODIES)) {
    const bytes = encoder.encode(text);
    const n = Math.max(3, Math.round(200_000 / text.length));
    const rounds = 7;
    // Interleaved, so a slower phase of the machine hits both.
    const timesLocal: number[] = [], timesNpm: number[] = [];
    const timesJson: number[] = [], timesBytes: number[] = [];
    const timesParse: number[] = [];
    for (let r = 0; r < 3; r++) {
      timesLocal.push(await median(() => canonicalJson(bytes), n, rounds));
      timesNpm.push(
        await median(
          () =>
            encoder.encode(canonicalize(JSON.parse(decoder.decode(bytes)))!),
          n,
          rounds,
        ),
      );
      timesJson.push(
        await median(() => jsonFingerprint(request, bytes), n, rounds),
      );
      timesParse.push(
        await median(() => JSON.parse(decoder.decode(bytes)), n, rounds),
      );
      timesBytes.push(
        await median(
          () => requestFingerprint("POST", request.url, bytes),
          n,
          rounds,
        ),
      );
    }
    const best = (t: number[]) => Math.min(...t);
    speed[`${name}: npm / local canonicaliser`] = best(timesNpm) /
      best(timesLocal);
    speed[`${name}: jsonFingerprint / requestFingerprint`] = best(timesJson) /
      best(timesBytes);
    speed[`${name}: jsonFingerprint / JSON.parse (the handler's req.json())`] =
      best(timesJson) / best(timesParse);
  }
  return { rfc, edges, speed };
}
