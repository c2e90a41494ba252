// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Case 5 of the fault-injection suite: the hostile-input fuzz. 10,000
 * generated requests (fast-check, a fixed seed; `FAULTS_SEED` picks
 * another) written as raw bytes over real TCP (`Deno.connect`) into the
 * middleware under `Deno.serve` on port 0, at bounded concurrency: methods
 * in odd case, keys empty, too long, with control characters, non-ASCII,
 * sf-string edge cases, two `Idempotency-Key` lines; bodies whose
 * `Content-Length` lies either way, chunked bodies cut off or with garbage
 * chunk sizes, huge declared lengths.
 *
 * Allowed: any 2xx or 4xx answer; no answer at all only where the framing
 * itself is garbage (a chunk size that is not hex: the HTTP layer drops the
 * connection before any handler). Everything else is a failure: any 5xx (the
 * store is a MemoryStore that never goes down, so not even 503), no answer
 * to a well-framed request, a handler run for a malformed key on a guarded
 * method (POST or PATCH, in any case; two `Idempotency-Key` lines count as
 * malformed, as no single key was sent), a second 2xx run of one key, and a
 * server that stops answering. Runs are judged by what the client sent.
 *
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { idempotency } from "../../mod.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { pool, report, SEALING } from "./_load.ts";

const REQUESTS = 10_000;
const CONCURRENCY = 24;
const MAX_REQUEST_BYTES = 4096;
const SEED = Number(Deno.env.get("FAULTS_SEED") ?? 20261130);

type BodyMode =
  | "exact"
  | "none"
  | "short"
  | "long"
  | "chunked"
  | "chunked-cut"
  | "chunked-garbage"
  | "huge-length"
  | "bad-length";

interface Spec {
  method: string;
  /** The raw bytes of each Idempotency-Key line's value (none: no header). */
  keys: readonly string[];
  body: string;
  mode: BodyMode;
}

/**
 * The Idempotency-Key values a server reads from the lines `request()`
 * writes: a bare LF ends a field line (RFC 9112 lets a server read it as
 * CRLF), and an empty line ends the header block, so a value ending in LF
 * hides every key line after it.
 */
function keyLinesSeen(keys: readonly string[]): string[] {
  const text = keys.map((key) => `Idempotency-Key: ${key}\r\n`).join("");
  const seen: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\r$/, "");
    if (line === "") break;
    const match = /^Idempotency-Key:(.*)$/.exec(line);
    if (match) seen.push(match[1]!);
  }
  return seen;
}

/**
 * The key a header value carries, or `null` when it is malformed: written
 * from the README's rule (a bare token of 1–255 printable ASCII characters,
 * or an sf-string whose content is 1–255 characters, neither with a comma),
 * apart from the library's parser.
 */
function expectedKey(value: string): string | null {
  const v = value.replace(/^[ \t]+|[ \t]+$/g, "");
  if (v.startsWith('"')) {
    let key = "";
    for (let i = 1; i < v.length; i++) {
      const c = v[i]!;
      if (c === '"') {
        return i === v.length - 1 && key.length >= 1 && key.length <= 255 &&
            !key.includes(",")
          ? key
          : null;
      }
      if (c === "\\") {
        const next = v[i + 1];
        if (next !== '"' && next !== "\\") return null;
        key += next;
        i++;
        continue;
      }
      const code = c.charCodeAt(0);
      if (code < 0x20 || code > 0x7e) return null;
      key += c;
    }
    return null;
  }
  return /^[\x21-\x7e]{1,255}$/.test(v) && !v.includes(",") ? v : null;
}

const printable = (min: number, max: number) =>
  fc.string({
    unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) =>
      String.fromCharCode(c)
    ),
    minLength: min,
    maxLength: max,
  });

/** A pool of keys that recur, so that replays and conflicts happen too. */
const POOL = Array.from({ length: 40 }, (_, i) => `order-${i}`);

const keyValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...POOL) },
  { weight: 4, arbitrary: printable(1, 40) },
  { weight: 1, arbitrary: printable(250, 255) },
  { weight: 2, arbitrary: printable(256, 400) }, // too long
  { weight: 2, arbitrary: fc.constantFrom("", " ", "\t", "  \t ") }, // empty
  {
    weight: 3,
    arbitrary: fc.tuple(
      printable(0, 10),
      fc.integer({ min: 0, max: 31 }),
      printable(0, 10),
    )
      .map(([a, c, b]) => `${a}${String.fromCharCode(c)}${b}`), // control characters
  },
  {
    weight: 1,
    arbitrary: printable(1, 10).map((a) => `${a}\x7f`),
  },
  {
    weight: 3,
    arbitrary: fc.tuple(
      printable(0, 10),
      fc.constantFrom("é", "\xff", "€", "日本", "\u{1F600}", "\x80"),
    ).map(([a, u]) => `${a}${u}`), // non-ASCII
  },
  {
    weight: 5,
    arbitrary: fc.oneof(
      printable(1, 20).filter((s) => !/["\\]/.test(s)).map((s) => `"${s}"`),
      fc.constantFrom(
        '""',
        '"',
        '"abc',
        'abc"',
        '"a\\"b"',
        '"a\\\\b"',
        '"a\\b"',
        '"a\\',
        '"a b"',
        '"a"; p=1',
        '"a" x',
        '"a""b"',
        '"order-1"',
        ' "order-2" ',
        '"\\"',
        `"${"x".repeat(255)}"`,
        `"${"x".repeat(256)}"`,
        `"${"\\\\".repeat(255)}"`,
        '"tab\there"',
      ),
    ), // sf-string edge cases
  },
  {
    weight: 2,
    arbitrary: fc.tuple(fc.constantFrom(...POOL), fc.constantFrom(" ", "\t"))
      .map(([k, s]) => `${s}${k}${s}`), // surrounding whitespace
  },
);

const spec: fc.Arbitrary<Spec> = fc.record({
  method: fc.constantFrom(
    "POST",
    "POST",
    "POST",
    "PATCH",
    "post",
    "Post",
    "pOsT",
    "patch",
    "Patch",
    "GET",
    "PUT",
    "DELETE",
  ),
  keys: fc.oneof(
    { weight: 1, arbitrary: fc.constant([]) },
    { weight: 8, arbitrary: keyValue.map((k) => [k]) },
    {
      weight: 2,
      arbitrary: fc.tuple(keyValue, keyValue).map(([a, b]) => [a, b]),
    },
    { weight: 1, arbitrary: keyValue.map((k) => [k, k]) },
  ),
  body: fc.oneof(
    fc.constant('{"amount":100}'),
    fc.string({ maxLength: 64 }),
    fc.constantFrom(
      "x".repeat(MAX_REQUEST_BYTES),
      "y".repeat(MAX_REQUEST_BYTES + 1),
    ),
  ),
  mode: fc.constantFrom<BodyMode>(
    "exact",
    "exact",
    "exact",
    "none",
    "short",
    "long",
    "chunked",
    "chunked",
    "chunked-cut",
    "chunked-garbage",
    "huge-length",
    "bad-length",
  ),
});

const encoder = new TextEncoder();

/** Header bytes as written: UTF-8 for non-ASCII, raw for the rest. */
function request(s: Spec, index: number, rand: () => number): Uint8Array {
  const body = encoder.encode(s.body);
  let head =
    `${s.method} /payments?x=1 HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n`;
  head += `X-Fuzz: ${index}\r\n`;
  for (const key of s.keys) head += `Idempotency-Key: ${key}\r\n`;
  let tail: Uint8Array = body;
  switch (s.mode) {
    case "exact":
      head += `Content-Length: ${body.byteLength}\r\n`;
      break;
    case "none":
      tail = new Uint8Array(0);
      break;
    case "short": // claims more than it sends
      head += `Content-Length: ${
        body.byteLength + 1 + Math.floor(rand() * 100)
      }\r\n`;
      break;
    case "long": // sends more than it claims
      head += `Content-Length: ${Math.floor(body.byteLength / 2)}\r\n`;
      break;
    case "chunked":
    case "chunked-cut": {
      head += "Transfer-Encoding: chunked\r\n";
      let text = "";
      let i = 0;
      while (i < s.body.length) {
        const n = 1 + Math.floor(rand() * 20);
        const part = encoder.encode(s.body.slice(i, i + n));
        text += `${part.byteLength.toString(16)}\r\n${
          s.body.slice(i, i + n)
        }\r\n`;
        i += n;
      }
      text += "0\r\n\r\n";
      tail = encoder.encode(text);
      if (s.mode === "chunked-cut") {
        tail = tail.subarray(
          0,
          Math.floor(rand() * Math.max(1, tail.byteLength - 5)),
        );
      }
      break;
    }
    case "chunked-garbage":
      head += "Transfer-Encoding: chunked\r\n";
      tail = encoder.encode(
        `${
          [
            "zz",
            "-1",
            "ffffffffffffffffffff",
            "5;",
            " ",
          ][Math.floor(rand() * 5)]
        }\r\nabcde\r\n0\r\n\r\n`,
      );
      break;
    case "huge-length":
      head += `Content-Length: ${
        [
          "1000000000000",
          "9007199254740993",
          "4294967296",
        ][Math.floor(rand() * 3)]
      }\r\n`;
      break;
    case "bad-length":
      head += `Content-Length: ${
        [
          "abc",
          "-1",
          "1, 2",
          "0x10",
          "99999999999999999999",
        ][Math.floor(rand() * 5)]
      }\r\n`;
      break;
  }
  const headBytes = encoder.encode(`${head}\r\n`);
  const out = new Uint8Array(headBytes.byteLength + tail.byteLength);
  out.set(headBytes);
  out.set(tail, headBytes.byteLength);
  return out;
}

/**
 * Writes a request, reads the answer to the end: its status, or 0 for none.
 * A body cut short is followed by a half-close, so the server sees its end.
 */
async function exchange(
  port: number,
  bytes: Uint8Array,
  halfClose: boolean,
): Promise<number> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    try {
      await conn.write(bytes);
      if (halfClose) await conn.closeWrite();
    } catch { /* the server may close first: read what it said */ }
    let head = "";
    const buffer = new Uint8Array(16_384);
    // A bound, not an expectation: a server that never answers fails the
    // case (status -1) instead of hanging the suite.
    const stall = setTimeout(() => conn.close(), 15_000);
    try {
      for (;;) {
        const n = await conn.read(buffer).catch(() => null);
        if (n === null) break;
        if (head.length < 32) {
          head += new TextDecoder().decode(
            buffer.subarray(0, Math.min(n, 32)),
          );
        }
      }
    } finally {
      clearTimeout(stall);
    }
    const match = /^HTTP\/1\.1 (\d{3})/.exec(head);
    return match ? Number(match[1]) : 0;
  } finally {
    try {
      conn.close();
    } catch { /* closed by the stall bound */ }
  }
}

Deno.test("faults: 10,000 hostile requests over raw TCP into Deno.serve: no 5xx, no run for a malformed key, still answering", async () => {
  const runs = new Map<string, number>();
  const malformedRuns: string[] = [];
  let executions = 0;
  const guarded = (method: string) =>
    ["POST", "PATCH"].includes(method.toUpperCase());
  // The run is judged by what the client sent (its spec, found by the
  // request's X-Fuzz index), never by what the server made of it: two
  // Idempotency-Key lines are never one key, whatever they join into.
  const specs = fc.sample(spec, { numRuns: REQUESTS, seed: SEED });
  const handler = idempotency(async (req) => {
    try {
      await req.arrayBuffer();
    } catch {
      return new Response("the app could not read the body", { status: 400 });
    }
    const sent = specs[Number(req.headers.get("x-fuzz") ?? NaN)];
    if (sent !== undefined && sent.keys.length > 0 && guarded(sent.method)) {
      executions++;
      const lines = keyLinesSeen(sent.keys);
      const key = lines.length === 1 ? expectedKey(lines[0]!) : null;
      if (key === null) {
        malformedRuns.push(
          `${sent.method} ${JSON.stringify(sent.keys).slice(0, 60)} (seen as ${
            JSON.stringify(req.headers.get("idempotency-key"))
          })`,
        );
      } else runs.set(key, (runs.get(key) ?? 0) + 1);
    }
    return new Response(`ran ${crypto.randomUUID()}`, { status: 201 });
  }, {
    ...SEALING,
    scope: "global",
    store: new MemoryStore(),
    maxRequestBytes: MAX_REQUEST_BYTES,
    lease: 60_000,
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    handler,
  );
  const port = server.addr.port;
  try {
    // One generator per request, so the bytes do not depend on scheduling.
    const randomFor = (index: number) => {
      let state = (SEED ^ Math.imul(index + 1, 2654435761)) >>> 0 || 1;
      return () => {
        state ^= state << 13;
        state ^= state >>> 17;
        state ^= state << 5;
        return (state >>> 0) / 4294967296;
      };
    };
    const statuses: Record<string, number> = {};
    const failures: string[] = [];
    await pool(specs, CONCURRENCY, async (s, index) => {
      const status = await exchange(
        port,
        request(s, index, randomFor(index)),
        s.mode === "short" || s.mode === "chunked-cut" ||
          s.mode === "huge-length",
      );
      const label = `${s.mode}:${
        status === 0 ? "none" : `${Math.floor(status / 100)}xx`
      }`;
      statuses[label] = (statuses[label] ?? 0) + 1;
      // No answer is allowed where the client broke its own framing: garbage,
      // or a chunked body cut and half-closed, which Deno.serve closes once it
      // sees the cut, whether or not the answer was on its way (a handler
      // slower by 2 ms, or a sealed record, loses the race for a few).
      const allowed = status === 0
        ? s.mode === "chunked-garbage" || s.mode === "chunked-cut"
        : status >= 200 && status < 500;
      if (!allowed && failures.length < 20) {
        failures.push(
          `${status} ${s.mode} ${s.method} ${
            JSON.stringify(s.keys).slice(0, 60)
          }`,
        );
      } else if (!allowed) failures.push("…");
    });
    const duplicates = [...runs].filter(([, n]) => n > 1);
    // Still answering: a fresh key runs once, then replays.
    const post = () =>
      fetch(`http://127.0.0.1:${port}/payments`, {
        method: "POST",
        headers: { "idempotency-key": "after-the-fuzz" },
        body: "{}",
      });
    const first = await post();
    await first.body?.cancel();
    const again = await post();
    await again.body?.cancel();
    report("hostile-input fuzz", {
      seed: SEED,
      requests: specs.length,
      executions,
      malformedKeyRuns: malformedRuns.length,
      duplicates: duplicates.length,
      failures: failures.length,
      statuses,
    });
    assert.deepEqual({
      malformedKeyRuns: malformedRuns.slice(0, 5),
      keysRunTwice: duplicates.slice(0, 5),
      fiveHundredsOrNoAnswer: failures.slice(0, 8),
    }, { malformedKeyRuns: [], keysRunTwice: [], fiveHundredsOrNoAnswer: [] });
    assert.equal(first.status, 201);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
  } finally {
    await server.shutdown();
  }
});
