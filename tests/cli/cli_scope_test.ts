// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The CLI's record names, as a subprocess on a Deno KV file: `--global` is
 * the `scope: "global"` option and `--scope global` the text a scope
 * function returned (each finds its own record only, with a hint when the
 * text finds nothing); `--secret-env` takes `hex:` and `base64:` byte
 * secrets, as an app's `Uint8Array` secret, and refuses malformed ones
 * (exit 2, naming the problem). The relative times it prints, at n-1/n/n+1
 * around now; and, as properties, every byte string read back from its hex,
 * base64 and URL-safe spellings, and "just now"/"in"/"ago" by the distance.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { idempotency } from "../../mod.ts";
import fc from "fast-check";
import { secretOf } from "../../src/cli/_args.ts";
import { time } from "../../src/cli/_report.ts";
import { KvStore } from "../../src/stores/kv.ts";
import { expectExit } from "../_support/cli.ts";

/** A KV file with one record of each scope spelling, and the args naming it. */
async function kvWith(
  records: {
    scope: "global" | (() => string);
    key: string;
    secret?: Uint8Array;
  }[],
): Promise<{ args: string[]; [Symbol.asyncDispose](): Promise<void> }> {
  const path = await Deno.makeTempFile({ suffix: ".db" });
  const kv = await Deno.openKv(path);
  const store = new KvStore({ kv });
  for (const { scope, key, secret } of records) {
    const handler = idempotency(() => new Response("ok", { status: 201 }), {
      scope,
      store,
      ...(secret && { secret }),
    });
    const res = await handler(
      new Request("http://api.test/pay", {
        method: "POST",
        headers: { "idempotency-key": key },
      }),
    );
    assert.equal(res.status, 201);
    await res.body?.cancel();
  }
  kv.close();
  return {
    args: ["--kv", path],
    [Symbol.asyncDispose]: () => Deno.remove(path),
  };
}

const encodeHex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const encodeBase64 = (b: Uint8Array) => Buffer.from(b).toString("base64");

const HINT =
  'hint: looked up the scope text "global"; for the scope: "global" option use --global';

Deno.test('cli --global finds the scope: "global" option\'s record, --scope global a function\'s "global"', async () => {
  await using db = await kvWith([
    { scope: "global", key: "opt-1" },
    { scope: () => "global", key: "text-1" },
  ]);
  const inspect = (...rest: string[]) => ["inspect", ...db.args, ...rest];

  const option = await expectExit(0, inspect("--global", "--key", "opt-1"));
  assert.match(
    option.stdout,
    /key "opt-1" in the global scope \(scope: "global"\)/,
  );
  assert.match(option.stdout, /completed/);
  const text = await expectExit(
    0,
    inspect("--scope", "global", "--key", "text-1"),
  );
  assert.match(text.stdout, /key "text-1" in scope "global"/);
  assert.ok(!text.stdout.includes("hint:"), text.stdout);

  // Each is absent under the other spelling; only the text gets the hint.
  const missed = await expectExit(
    1,
    inspect("--scope", "global", "--key", "opt-1"),
  );
  assert.match(missed.stdout, /absent/);
  assert.equal(missed.stdout.trimEnd().split("\n").at(-1), HINT);
  const json = await expectExit(
    1,
    inspect("--scope", "global", "--key", "opt-1", "--json"),
  );
  assert.equal(JSON.parse(json.stdout).state, "absent"); // one JSON line, no hint
  const other = await expectExit(1, inspect("--global", "--key", "text-1"));
  assert.ok(!other.stdout.includes("hint:"), other.stdout);
  const alice = await expectExit(
    1,
    inspect("--scope", "alice", "--key", "opt-1"),
  );
  assert.ok(!alice.stdout.includes("hint:"), alice.stdout);

  // forget: the same names; the text's miss hints, the option's deletes.
  const forget = (
    ...rest: string[]
  ) => ["forget", ...db.args, ...rest, "--yes"];
  const kept = await expectExit(
    1,
    forget("--scope", "global", "--key", "opt-1"),
  );
  assert.match(kept.stdout, /nothing deleted/);
  assert.match(kept.stdout, /hint: looked up the scope text "global"/);
  await expectExit(0, forget("--global", "--key", "opt-1"));
  await expectExit(0, forget("--scope", "global", "--key", "text-1"));
  await expectExit(1, inspect("--global", "--key", "opt-1"));
  await expectExit(1, inspect("--scope", "global", "--key", "text-1"));
});

Deno.test("cli --global with --scope, --slot or stats is a usage error (exit 2)", async () => {
  const cases: [string[], RegExp][] = [
    [
      ["inspect", "--kv", "a", "--global", "--scope", "global", "--key", "k"],
      /give --global \(the scope: "global" option\) or --scope S .*not both/,
    ],
    [
      ["inspect", "--kv", "a", "--global", "--slot", "s"],
      /give --slot, or --scope with --key \(or --global with --key\)/,
    ],
    [["stats", "--kv", "a", "--global"], /--global is for inspect and forget/],
    [
      ["inspect", "--kv", "a", "--global=yes", "--key", "k"],
      /--global takes no value/,
    ],
    [
      ["inspect", "--kv", "a", "--key", "k"],
      /--global --key K \(the scope: "global" option\)/,
    ],
  ];
  for (const [args, message] of cases) {
    const run = await expectExit(2, args);
    assert.match(run.stderr, message, `cli ${args.join(" ")}`);
    assert.equal(run.stdout, "");
  }
});

Deno.test("cli --secret-env reads hex: and base64: as the bytes of a Uint8Array secret", async () => {
  const secret = crypto.getRandomValues(new Uint8Array(32));
  secret[0] = 0xfb; // base64 "+" and "/" (URL-safe "-" and "_") appear
  secret[1] = 0xff;
  await using db = await kvWith([{ scope: "global", key: "k1", secret }]);
  const args = [
    "inspect",
    ...db.args,
    "--global",
    "--key",
    "k1",
    "--secret-env",
    "S",
  ];
  const b64 = encodeBase64(secret);
  const urlSafe = b64.replace(/\+/g, "-").replace(/\//g, "_").replace(
    /=+$/,
    "",
  );
  assert.notEqual(urlSafe, b64);
  for (
    const value of [
      `hex:${encodeHex(secret)}`,
      `hex:${encodeHex(secret).toUpperCase()}`,
      `base64:${b64}`,
      `base64:${urlSafe}`,
    ]
  ) {
    const found = await expectExit(0, args, { S: value });
    assert.match(found.stdout, /completed/, value);
  }
  // The same bytes as text are another secret: absent.
  await expectExit(1, args, { S: encodeHex(secret) });
});

Deno.test("cli --secret-env refuses malformed hex: and base64: values, naming the problem (exit 2)", async () => {
  const args = [
    "inspect",
    "--kv",
    "a",
    "--global",
    "--key",
    "k",
    "--secret-env",
    "S",
  ];
  const hex = "ab".repeat(32);
  const cases: [string, RegExp][] = [
    [
      `hex:${hex.slice(1)}`,
      /S: the value after hex: must be hex digits \(0-9, a-f\), two a byte: 63 digits, an odd count$/m,
    ],
    [
      `hex:${hex.slice(2)}zz`,
      /S: the value after hex: must be hex digits .*: character 63 is not one$/m,
    ],
    [`hex:${hex.slice(2)}:x`, /character 63 is not one$/m],
    // A space is no hex digit (its position is named, never the secret).
    ["hex: ab", /character 1 is not one/],
    [
      "base64:not base64!",
      /S: the value after base64: is not standard or URL-safe base64: .*character/,
    ],
    [
      `base64:${"A".repeat(45)}`,
      /S: the value after base64: is not standard or URL-safe base64: .*single character/,
    ],
    // Well formed but short: the library's own check, on the bytes.
    ["hex:", /S: 'secret' must be at least 32 bytes .*current length is 0/],
    [
      `hex:${"ab".repeat(31)}`,
      /S: 'secret' must be at least 32 bytes .*current length is 31/,
    ],
    [`base64:${encodeBase64(new Uint8Array(31))}`, /current length is 31/],
  ];
  for (const [value, message] of cases) {
    const run = await expectExit(2, args, { S: value });
    assert.match(run.stderr, message, value);
    assert.match(run.stderr, /^error: --secret-env S: /);
  }
  // 32 bytes exactly is enough (it reaches the store: here a missing file, 3).
  await expectExit(3, args, { S: `hex:${hex}` });
});

Deno.test("cli relative times: within a second either way just now, else N s ago or in N s", () => {
  const now = Date.parse("2026-12-02T00:00:00.000Z");
  const rel = (ms: number) => /\((.*)\)$/.exec(time(now + ms, now))![1];
  assert.equal(rel(-1000), "1 s ago");
  assert.equal(rel(-999), "just now");
  assert.equal(rel(-1), "just now"); // a claim just made
  assert.equal(rel(0), "just now");
  assert.equal(rel(1), "just now"); // a server clock a little ahead
  assert.equal(rel(999), "just now");
  assert.equal(rel(1000), "in 1 s");
  assert.equal(rel(1999), "in 1 s");
  assert.equal(rel(2000), "in 2 s");
  assert.equal(rel(-119_999), "119 s ago");
  assert.equal(rel(-120_000), "2 min ago");
  assert.equal(rel(7_199_999), "in 120 min");
  assert.equal(rel(7_200_000), "in 2 h");
  assert.equal(time(now, now), "2026-12-02T00:00:00.000Z (just now)");
  assert.equal(time(null, now), "(not kept by this store)");
});

Deno.test("secretOf() and time(): properties over any bytes and any distance", () => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 0, maxLength: 80 }), (bytes) => {
      const b64 = encodeBase64(bytes);
      const url = b64.replace(/\+/g, "-").replace(/\//g, "_").replace(
        /=+$/,
        "",
      );
      for (
        const value of [
          `hex:${encodeHex(bytes)}`,
          `base64:${b64}`,
          `base64:${url}`,
        ]
      ) {
        assert.deepEqual(secretOf(value), bytes, value);
      }
    }),
  );
  // A value with no prefix is the text itself, whatever it holds.
  fc.assert(
    fc.property(fc.string(), (text) => {
      fc.pre(!/^(hex|base64):/.test(text));
      assert.equal(secretOf(text), text);
    }),
  );
  const now = Date.parse("2026-12-02T00:00:00.000Z");
  fc.assert(
    fc.property(fc.integer({ min: -1e10, max: 1e10 }), (diff) => {
      const shown = time(now + diff, now);
      assert.equal(shown.endsWith("(just now)"), Math.abs(diff) < 1000, shown);
      assert.equal(/\(in /.test(shown), diff >= 1000, shown);
      assert.equal(/ ago\)$/.test(shown), diff <= -1000, shown);
    }),
  );
});
