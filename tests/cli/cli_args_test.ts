// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The CLI's grammar (`--help`): fast-check over argv shapes (`--a=b` and
 * `--a b`, options in any order, repeated, missing values, unknown names,
 * anything at all) against what the help says, and the edges an operator
 * types by mistake. Every argv parses, or is a usage error (exit 2) whose
 * line names the problem; nothing here reaches a store.
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { parseArgs, type Parsed, UsageError } from "../../src/cli/_args.ts";
import { main } from "../../src/cli/cli.ts";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import { slotOf } from "../../mod.ts";

const SECRET = "s".repeat(32);
const env = (name: string) => name === "SECRET" ? SECRET : undefined;

/** The outcome of a parse: what it gave, or the usage line. */
function outcome(args: string[]): Parsed | null | { usage: string } {
  try {
    return parseArgs(args, env);
  } catch (error) {
    if (error instanceof UsageError) return { usage: error.message };
    throw error; // anything else is a bug of the parser
  }
}

const FLAGS = ["json", "yes", "global"];
/** Options with a value, and values the help allows for each. */
const VALUED: Record<string, fc.Arbitrary<string>> = {
  redis: fc.constant("redis://127.0.0.1:1"),
  postgres: fc.constant("postgres://postgres@127.0.0.1:1/test"),
  kv: fc.constantFrom("/tmp/a.db", "https://kv.example"),
  prefix: fc.constantFrom("p:", '["a","b"]'),
  table: fc.constantFrom("t", "s.t"),
  scope: fc.constantFrom("alice", "global", "a b"),
  key: fc.constantFrom("k1", '"quoted"', "x".repeat(255)),
  "secret-env": fc.constant("SECRET"),
  slot: fc.constantFrom("slot-1", "0".repeat(64)),
  limit: fc.constantFrom("1", "10", "999999999"),
};

/** One option as argv words: `[--a, b]`, or `[--a=b]` when `joined`. */
type Item = { name: string; value?: string; joined: boolean };
const words = ({ name, value, joined }: Item) =>
  value === undefined
    ? [`--${name}`]
    : joined
    ? [`--${name}=${value}`]
    : [`--${name}`, value];

/** A command and distinct options, each well formed. */
const clean = fc.record({
  command: fc.constantFrom("inspect", "forget", "stats"),
  items: fc.uniqueArray(
    fc.oneof(
      fc.record({ name: fc.constantFrom(...FLAGS), joined: fc.boolean() })
        .map(({ name }) => ({ name, joined: false }) as Item),
      fc.constantFrom(...Object.keys(VALUED)).chain((name) =>
        fc.record({ value: VALUED[name]!, joined: fc.boolean() }).map((
          r,
        ) => ({ name, ...r }))
      ),
    ),
    { selector: (item) => item.name, maxLength: 7 },
  ),
  at: fc.nat(),
});
/** The argv of `items`, `extra` words (the command) put between two of them. */
const argvOf = (
  command: string,
  items: Item[],
  at: number,
  extra = [command],
) => {
  const groups = items.map(words);
  groups.splice(at % (groups.length + 1), 0, extra);
  return groups.flat();
};

Deno.test("cli grammar: --a=b is --a b, and options may come in any order", () => {
  fc.assert(
    fc.property(clean, fc.nat(), ({ command, items, at }, seed) => {
      const expected = outcome(argvOf(command, items, at));
      const joined = items.map((item) => ({ ...item, joined: true }));
      const spaced = items.map((item) => ({ ...item, joined: false }));
      const shuffled = [...items].sort((a, b) =>
        ((a.name.length * 31 + seed) % 7) - ((b.name.length * 31 + seed) % 7)
      );
      assert.deepEqual(outcome(argvOf(command, joined, at)), expected);
      assert.deepEqual(outcome(argvOf(command, spaced, 0)), expected);
      assert.deepEqual(outcome(argvOf(command, shuffled, at)), expected);
    }),
  );
});

/** A slip in otherwise clean argv, and the usage line that must name it. */
const slips = fc.oneof(
  fc.constantFrom("zz", "Key", "secret", "redis_url").map((name) => ({
    name,
    word: [`--${name}`],
    line: `unknown option "--${name}"`,
  })),
  fc.constantFrom(...FLAGS).map((name) => ({
    name,
    word: [`--${name}=1`],
    line: `--${name} takes no value`,
  })),
  fc.constantFrom(...Object.keys(VALUED)).map((name) => ({
    name,
    word: [`--${name}`, "--json"], // the next option is not its value
    line: `--${name} needs a value`,
  })),
);

Deno.test("cli grammar: an unknown option, a flag's value, a missing value is named, whatever else is wrong", () => {
  fc.assert(
    fc.property(clean, slips, fc.nat(), ({ command, items, at }, slip, to) => {
      const kept = items.filter((i) =>
        i.name !== "json" && i.name !== slip.name
      );
      const args = argvOf(command, kept, at, [command]);
      const groups = kept.map(words);
      groups.splice(at % (groups.length + 1), 0, [command]);
      groups.splice(to % (groups.length + 1), 0, slip.word);
      args.splice(0, args.length, ...groups.flat());
      const found = outcome(args);
      assert.ok(found !== null && "usage" in found, JSON.stringify(args));
      assert.equal(found.usage, slip.line, JSON.stringify(args));
    }),
  );
});

Deno.test("cli grammar: an option given twice is named, in either form", () => {
  fc.assert(
    fc.property(clean, fc.nat(), fc.boolean(), (drawn, which, joined) => {
      fc.pre(drawn.items.length > 0);
      const twice = drawn.items[which % drawn.items.length]!;
      const items = [...drawn.items, { ...twice, joined }];
      const found = outcome(argvOf(drawn.command, items, drawn.at));
      assert.deepEqual(found, { usage: `--${twice.name} is given twice` });
    }),
  );
});

Deno.test("cli grammar: any argv at all parses, asks for help, or is a usage error", () => {
  const word = fc.oneof(
    fc.string(),
    fc.constantFrom("--", "-", "-h", "--help", "help", "inspect", "stats"),
    fc.constantFrom(...FLAGS, ...Object.keys(VALUED)).chain((n) =>
      fc.constantFrom(`--${n}`, `--${n}=`, `--${n}=x`)
    ),
  );
  fc.assert(fc.property(fc.array(word, { maxLength: 8 }), (args) => {
    const found = outcome(args); // throws for any other error
    if (found !== null && "usage" in found) {
      assert.ok(found.usage.length > 0 && !found.usage.includes("\n"));
    }
  }));
});

Deno.test("cli grammar: the edges an operator types", async (t) => {
  const usage = (...args: string[]) => {
    const found = outcome(args);
    assert.ok(found !== null && "usage" in found, args.join(" "));
    return found.usage;
  };
  const redis = ["--redis", "redis://127.0.0.1:1"];
  await t.step(
    "an empty --scope names the record (exit 2), never reaches the store",
    () => {
      assert.match(
        usage("inspect", ...redis, "--scope=", "--key", "k"),
        /^name the record/,
      );
      assert.match(
        usage("inspect", ...redis, "--scope", "", "--key", "k"),
        /^name the record/,
      );
    },
  );
  await t.step("a key the middleware refuses is named as --key", () => {
    assert.match(
      usage("inspect", ...redis, "--scope", "a", "--key", "a b"),
      /^--key is not a key the middleware accepts/,
    );
    assert.match(
      usage("inspect", ...redis, "--scope", "a", "--key", "x".repeat(256)),
      /^--key is not a key/,
    );
    const ok = outcome([
      "inspect",
      ...redis,
      "--scope",
      "a",
      "--key",
      "x".repeat(255),
    ]);
    assert.ok(ok !== null && !("usage" in ok));
    assert.equal(ok.slot, slotOf("a", "x".repeat(255)));
  });
  await t.step("a secret goes into the slot, as the middleware's does", () => {
    const found = outcome([
      "forget",
      ...redis,
      "--yes",
      "--global",
      "--key",
      "k",
      "--secret-env",
      "SECRET",
    ]);
    assert.ok(found !== null && !("usage" in found));
    assert.equal(found.slot, slotOf("", "k", { secret: SECRET }));
    assert.notEqual(found.slot, slotOf("", "k"));
    assert.match(
      usage(
        "inspect",
        ...redis,
        "--global",
        "--key",
        "k",
        "--secret-env",
        "UNSET",
      ),
      /^--secret-env UNSET: the environment variable UNSET is not set$/,
    );
  });
  await t.step("a slot is checked as the store checks it", () => {
    assert.match(
      usage("inspect", ...redis, "--slot", "x".repeat(257)),
      /^--slot must be at most 256 bytes/,
    );
    assert.equal(
      (outcome(["inspect", ...redis, "--slot", "x".repeat(256)]) as Parsed)
        .slot,
      "x".repeat(256),
    );
  });
  await t.step(
    "one location: a slot with a key, a secret or a scope, --global with --scope",
    () => {
      assert.equal(
        usage("inspect", ...redis, "--slot", "s", "--secret-env", "SECRET"),
        "--secret-env hashes a --key: a --slot is hashed",
      );
      for (const other of [["--key", "k"], ["--scope", "a"], ["--global"]]) {
        assert.equal(
          usage("inspect", ...redis, "--slot", "s", ...other),
          "give --slot, or --scope with --key (or --global with --key)",
        );
      }
      assert.match(
        usage("inspect", ...redis, "--global", "--scope", "a", "--key", "k"),
        /not both$/,
      );
      assert.match(
        usage("stats", ...redis, "--key", "k"),
        /^--key is for inspect and forget/,
      );
      assert.match(
        usage(
          "inspect",
          ...redis,
          "--scope",
          "a",
          "--key",
          "k",
          "--limit",
          "1",
        ),
        /^--limit is for stats only$/,
      );
      assert.match(
        usage("inspect", ...redis, "--scope", "a", "--key", "k", "--yes"),
        /^--yes is for forget only$/,
      );
      assert.match(
        usage("forget", ...redis, "--scope", "a", "--key", "k"),
        /add --yes/,
      );
    },
  );
  await t.step("short options, the terminator, a second command", () => {
    assert.equal(usage("stats", ...redis, "-x"), 'unknown option "-x"');
    assert.equal(usage("stats", ...redis, "--"), 'unknown option "--"');
    assert.equal(
      usage("stats", "inspect", ...redis),
      'unexpected argument "inspect"',
    );
    assert.equal(outcome(["stats", "-h"]), null);
  });
  await t.step(
    "--limit at its bounds: 1 and 999,999,999 are counts, 0 and 10 digits are not",
    () => {
      for (const limit of ["1", "999999999"]) {
        assert.equal(
          (outcome(["stats", ...redis, "--limit", limit]) as Parsed).limit,
          Number(limit),
        );
      }
      for (const limit of ["0", "1000000000", "01", "-1", "1.5"]) {
        assert.equal(
          usage("stats", ...redis, "--limit", limit),
          `--limit must be a positive integer: current value is ${limit}`,
        );
      }
    },
  );
});

Deno.test("cli inspect: the lease's end and the record's expiry are two instants, each said in the future", async () => {
  const path = await Deno.makeTempFile({ suffix: ".db" });
  try {
    const store = new SqliteStore({ database: path });
    await store.migrate();
    const slot = slotOf("", "k1");
    const now = Date.now();
    await store.claim(slot, {
      fingerprint: "f",
      leaseMs: 90_000,
      ttlMs: 3 * 3600_000,
    });
    store.close();
    const lines: string[] = [];
    const io = {
      stdout: (l: string) => lines.push(l),
      stderr: (l: string) => lines.push(l),
      env,
    };
    assert.equal(
      await main(["inspect", "--sqlite", path, "--global", "--key", "k1"], io),
      0,
    );
    const row = (name: string) =>
      lines.find((l) => l.startsWith(`  ${name.padEnd(12)} `));
    const instant = (name: string) => Date.parse(row(name)!.slice(15, 39));
    assert.ok(
      Math.abs(instant("lease ends") - (now + 90_000)) < 5_000,
      row("lease ends"),
    );
    assert.ok(
      Math.abs(instant("expires") - (now + 3 * 3600_000)) < 5_000,
      row("expires"),
    );
    assert.match(row("lease ends")!, /\(in (89|90) s\)$/);
    assert.match(row("expires")!, /\(in 3 h\)$/);
    assert.match(row("claimed")!, /\(just now\)$/);
  } finally {
    for (const end of ["", "-wal", "-shm"]) {
      await Deno.remove(path + end).catch(() => {});
    }
  }
});

Deno.test("cli: a store option's URL without its scheme is a usage error (exit 2), naming the form", () => {
  const cases: [string[], RegExp][] = [
    [
      ["--redis", "127.0.0.1:6399"],
      /^--redis takes a URL \(redis:\/\/HOST:PORT\): current value is 127\.0\.0\.1:6399$/,
    ],
    [
      ["--postgres", "localhost/test"],
      /^--postgres takes a URL \(postgres:\/\/USER@HOST:PORT\/DB\)/,
    ],
    [["--mysql", "postgres://root@h/db"], /^--mysql takes a URL \(mysql:/],
    [
      ["--postgres", "postgres://u:secret@h/db", "--redis", "http://h"],
      /^--redis takes a URL/,
    ],
  ];
  for (const [store, line] of cases) {
    const found = outcome(["stats", ...store]);
    assert.ok(found !== null && "usage" in found, store.join(" "));
    assert.match(found.usage, line);
    assert.doesNotMatch(found.usage, /secret/); // a password is never echoed
  }
  for (
    const url of [
      "redis://h:1",
      "rediss://h:1",
      "postgres://h/d",
      "postgresql://h/d",
      "mysql://h/d",
    ]
  ) {
    const option = url.startsWith("redis")
      ? "--redis"
      : url.startsWith("mysql")
      ? "--mysql"
      : "--postgres";
    const found = outcome(["stats", option, url]);
    assert.ok(found !== null && !("usage" in found), url);
  }
});

Deno.test("cli: --json says a single store's failure on stdout too; an absent record and an empty count say what else to check", async () => {
  const lines = { out: [] as string[], err: [] as string[] };
  const io = {
    stdout: (l: string) => lines.out.push(l),
    stderr: (l: string) => lines.err.push(l),
    env,
  };
  const closed = "redis://127.0.0.1:1"; // nobody listens on port 1
  assert.equal(await main(["stats", "--redis", closed, "--json"], io), 3);
  assert.equal(lines.out.length, 1);
  assert.match(
    JSON.parse(lines.out[0]!).error,
    /^Redis at 127\.0\.0\.1:1 is unreachable: /,
  );

  const path = await Deno.makeTempFile({ suffix: ".db" });
  try {
    const store = new SqliteStore({ database: path });
    await store.migrate();
    store.close();
    lines.out.length = lines.err.length = 0;
    assert.equal(await main(["stats", "--sqlite", path], io), 0);
    assert.deepEqual(lines.out, [
      "0 records: 0 in flight, 0 completed, 0 unreadable",
    ]);
    assert.deepEqual(lines.err, [
      "note: no records: is --prefix or --table the app's?",
    ]);
    lines.out.length = lines.err.length = 0;
    assert.equal(
      await main(
        ["inspect", "--sqlite", path, "--scope", "a", "--key", "k"],
        io,
      ),
      1,
    );
    assert.match(
      lines.err.join("\n"),
      /^note: if the app holds this record, check the options against the app's: --prefix or --table, --secret-env when it sets 'secret', and both stores of a FailoverStore$/,
    );
    lines.out.length = lines.err.length = 0;
    assert.equal(
      await main(["inspect", "--sqlite", path, "--slot", "0523"], io),
      1,
    );
    assert.match(
      lines.err.join("\n"),
      /, the whole slot \(64 hex digits, as an event gives it\)/,
    );
    lines.out.length = lines.err.length = 0;
    assert.equal(
      await main([
        "inspect",
        "--sqlite",
        path,
        "--slot",
        "0".repeat(64),
        "--json",
      ], io),
      1,
    );
    assert.deepEqual(JSON.parse(lines.out[0]!), {
      slot: "0".repeat(64),
      state: "absent",
    });
    assert.doesNotMatch(lines.err.join("\n"), /64 hex digits/);
  } finally {
    for (const end of ["", "-wal", "-shm"]) {
      await Deno.remove(path + end).catch(() => {});
    }
  }
});
