// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `@idempotent/http/cli` run as a subprocess, as an operator runs it, against
 * the real Redis, PostgreSQL, a Deno KV file and an SQLite file: a record the middleware
 * stored (scoped, under a secret) is inspected, counted and forgotten, after
 * which its key runs the handler again; bad usage exits 2 and an unreachable
 * server 3, each with its message.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { createClient } from "redis";
import { idempotency, slotOf } from "../../mod.ts";
import { main } from "../../src/cli/cli.ts";
import type { IdempotencyStore } from "../../src/store.ts";
import { KvStore } from "../../src/stores/kv.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import { deleteRedisKeys } from "../_support/redis.ts";
import {
  DATABASE_URL,
  freePort,
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "../_support/services.ts";

const CLI = new URL("../../src/cli/cli.ts", import.meta.url).pathname;
const SECRET = "cli-test-secret-0123456789abcdef0123456789";
const decoder = new TextDecoder();

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in a process of its own, with `CLI_SECRET` set. */
async function cli(...args: string[]): Promise<Run> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", CLI, ...args],
    env: { NO_COLOR: "1", CLI_SECRET: SECRET, CLI_SHORT: "short" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}

/** Runs the CLI and checks its exit code, showing its output if it differs. */
async function expectExit(code: number, ...args: string[]): Promise<Run> {
  const run = await cli(...args);
  assert.equal(
    run.code,
    code,
    `cli ${args.join(" ")} exited ${run.code}:\n${run.stdout}${run.stderr}`,
  );
  return run;
}

/** A store the test writes through, and the CLI arguments that name it. */
interface Case {
  store: IdempotencyStore;
  args: string[];
  /** Writes a value no store of ours wrote at `slot`. */
  plant(slot: string): Promise<void>;
  /** Whether `stats` reads at most `--limit` records (else it counts all). */
  bounded: boolean;
}

/**
 * Stores a record through the middleware (scope "alice", under a secret),
 * then drives every command of the CLI on it.
 */
async function exercise(
  { store, args, plant, bounded }: Case,
): Promise<void> {
  let runs = 0;
  const handler = idempotency(() => {
    runs++;
    return Response.json({ id: `pay_${runs}` }, { status: 201 });
  }, {
    scope: (req) => req.headers.get("x-user") ?? "anonymous",
    store,
    secret: SECRET,
  });
  const key = `key-${crypto.randomUUID()}`;
  const pay = async () => {
    const res = await handler(
      new Request("http://api.test/pay", {
        method: "POST",
        headers: { "idempotency-key": key, "x-user": "alice" },
        body: "{}",
      }),
    );
    return { status: res.status, body: await res.text() };
  };
  assert.deepEqual(await pay(), { status: 201, body: '{"id":"pay_1"}' });
  const slot = slotOf("alice", key, { secret: SECRET });
  const named = [
    "--scope",
    "alice",
    "--key",
    key,
    "--secret-env",
    "CLI_SECRET",
  ];

  const human = await expectExit(0, "inspect", ...args, ...named);
  assert.match(human.stdout, /completed/);
  assert.match(human.stdout, /status +201/);
  assert.ok(human.stdout.includes(slot), human.stdout);

  const json = JSON.parse(
    (await expectExit(0, "inspect", ...args, ...named, "--json")).stdout,
  );
  assert.equal(json.slot, slot);
  assert.equal(json.state, "completed");
  assert.equal(json.status, 201);
  assert.equal(json.bodyBytes, '{"id":"pay_1"}'.length);
  assert.ok(json.headerNames.includes("content-type"), json.headerNames);
  const bySlot = JSON.parse(
    (await expectExit(0, "inspect", ...args, "--slot", slot, "--json")).stdout,
  );
  // The same record (Redis computes expiresAt at each read, to the ms).
  assert.deepEqual(
    { ...bySlot, expiresAt: 0 },
    { ...json, expiresAt: 0 },
  );
  assert.ok(Math.abs(bySlot.expiresAt - json.expiresAt) < 1000);

  // Without the secret, or in another scope, it is another slot: absent.
  const plain = await expectExit(
    1,
    "inspect",
    ...args,
    "--scope",
    "alice",
    "--key",
    key,
  );
  assert.match(plain.stdout, /absent/);
  await expectExit(1, "inspect", ...args, ...named.with(1, "bob"));

  // One more record in flight and one unreadable, then the counts.
  const claim = await store.claim(`${slot}-in-flight`, {
    fingerprint: "fp",
    leaseMs: 60_000,
    ttlMs: 60_000,
  });
  assert.equal(claim.state, "acquired");
  await plant(`${slot}-unreadable`);
  const unreadable = await expectExit(
    0,
    "inspect",
    ...args,
    "--slot",
    `${slot}-unreadable`,
  );
  assert.match(unreadable.stdout, /unreadable/);
  const stats = JSON.parse(
    (await expectExit(0, "stats", ...args, "--json")).stdout,
  );
  assert.deepEqual(stats, {
    inFlight: 1,
    completed: 1,
    unreadable: 1,
    exact: true,
    sealed: {},
  });
  const statsText = await expectExit(0, "stats", ...args);
  assert.match(statsText.stdout, /3 records: 1 in flight, 1 completed/);
  const limited = await expectExit(0, "stats", ...args, "--limit", "1");
  if (bounded) {
    assert.match(limited.stdout, /^at least [1-3] records/);
    assert.match(limited.stderr, /lower bound \(raise --limit\)/);
  } else {
    assert.match(limited.stdout, /^3 records/);
    assert.equal(limited.stderr, "");
  }

  // forget needs --yes; it deletes once; the key then runs again.
  const unconfirmed = await expectExit(2, "forget", ...args, ...named);
  assert.match(unconfirmed.stderr, /--yes/);
  const forgot = JSON.parse(
    (await expectExit(0, "forget", ...args, ...named, "--yes", "--json"))
      .stdout,
  );
  assert.deepEqual(forgot, { slot, result: "deleted" });
  await expectExit(1, "inspect", ...args, ...named);
  const again = await expectExit(1, "forget", ...args, ...named, "--yes");
  assert.match(again.stdout, /absent/);
  assert.deepEqual(await pay(), { status: 201, body: '{"id":"pay_2"}' });
  assert.equal(runs, 2);
}

integrationTest(
  "cli inspects, counts and forgets a RedisStore's records",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("cli")}:`;
    const client = createClient({ url: REDIS_URL });
    client.on("error", () => {});
    await client.connect();
    try {
      await exercise({
        store: new RedisStore({ client, prefix }),
        args: ["--redis", REDIS_URL, "--prefix", prefix],
        bounded: true,
        plant: async (slot) => {
          await client.set(prefix + slot, "not a record", { PX: 60_000 });
        },
      });
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  },
);

integrationTest(
  "cli inspects, counts and forgets a PostgresStore's records",
  POSTGRES_IGNORE,
  async () => {
    await using db = await postgresSchema("cli");
    const table = `${db.schema}.idempotency_keys`;
    const store = new PostgresStore({ sql: db.sql, table });
    await store.migrate();
    await exercise({
      store,
      args: ["--postgres", DATABASE_URL, "--table", table],
      bounded: false,
      plant: async (slot) => {
        // A row from a version this one does not know.
        await db.sql.unsafe(
          `INSERT INTO "${db.schema}".idempotency_keys (slot, version, state, expires_at)
         VALUES ($1, 999, 'completed', now() + interval '1 minute')`,
          [slot],
        );
      },
    });
    const missing = await expectExit(
      3,
      "stats",
      "--postgres",
      DATABASE_URL,
      "--table",
      `${db.schema}.missing`,
    );
    assert.match(
      missing.stderr,
      /does not exist: run `await store\.migrate\(\)`.*\(is --table the app's\?\)/,
    );
  },
);

integrationTest(
  "cli inspects, counts and forgets a KvStore's records",
  false,
  async () => {
    const path = await Deno.makeTempFile({ suffix: ".db" });
    const kv = await Deno.openKv(path);
    const prefix = ["my-app", "idempotency"];
    try {
      await exercise({
        store: new KvStore({ kv, prefix }),
        args: ["--kv", path, "--prefix", JSON.stringify(prefix)],
        bounded: true,
        plant: async (slot) => {
          await kv.set([...prefix, "rec", slot], "not a record", {
            expireIn: 60_000,
          });
        },
      });
    } finally {
      kv.close();
      await Deno.remove(path);
    }
  },
);

Deno.test("cli inspects, counts and forgets a SqliteStore's records; a missing file or table exits 3 naming it", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/app.sqlite`;
  const store = new SqliteStore({ database: path, table: "my_keys" });
  try {
    await store.migrate();
    const args = ["--sqlite", path, "--table", "my_keys"];
    await exercise({
      store,
      args,
      bounded: false,
      plant: async (slot) => {
        // A row from a version this one does not know.
        const db = new DatabaseSync(path);
        db.prepare(
          `INSERT INTO my_keys (slot, version, state, expires_at, created_at)
          VALUES (?, 999, 'completed', unixepoch() * 1000 + 60000, 0)`,
        ).run(slot);
        db.close();
        await Promise.resolve();
      },
    });
    const badName = await expectExit(2, "stats", ...args.with(3, ""));
    assert.match(badName.stderr, /'table' must be a non-empty string/);
    const noTable = await expectExit(3, "stats", "--sqlite", path);
    assert.match(
      noTable.stderr,
      /no such table: idempotency_keys: run `store\.migrate\(\)`.*\(is --table the app's\?\)/,
    );
    const noFile = await expectExit(3, "stats", "--sqlite", `${dir}/nope`);
    assert.match(noFile.stderr, /no such file/);
    await assert.rejects(Deno.stat(`${dir}/nope`), "nothing was created");
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test('cli --global names a key of scope: "global", parsed as the header is', async () => {
  const path = await Deno.makeTempFile({ suffix: ".db" });
  const kv = await Deno.openKv(path);
  try {
    const handler = idempotency(() => new Response("ok", { status: 201 }), {
      scope: "global",
      store: new KvStore({ kv }),
    });
    const res = await handler(
      new Request("http://api.test/pay", {
        method: "POST",
        headers: { "idempotency-key": "k1" },
      }),
    );
    await res.body?.cancel();
    const args = ["inspect", "--kv", path, "--global"];
    const found = await expectExit(0, ...args, "--key", "k1");
    assert.match(found.stdout, /key "k1" in the global scope/);
    // An RFC 8941 string is the key it quotes, as in the header.
    await expectExit(0, ...args, "--key", '"k1"');
    await expectExit(1, ...args, "--key", "k2");

    // A sealed record (the encryption option) hides its header names.
    const aes = { name: "AES-GCM", length: 256 };
    const key = await crypto.subtle.generateKey(aes, false, [
      "encrypt",
      "decrypt",
    ]);
    const sealing = idempotency(() => Response.json({ card: "4242" }), {
      scope: "global",
      store: new KvStore({ kv }),
      encryption: { keys: [{ id: "2026-01", key }] },
    });
    const sealed = await sealing(
      new Request("http://api.test/pay", {
        method: "POST",
        headers: { "idempotency-key": "k3" },
      }),
    );
    await sealed.body?.cancel();
    const human = await expectExit(0, ...args, "--key", "k3");
    assert.match(human.stdout, /headers +sealed/);
    const json = await expectExit(0, ...args, "--key", "k3", "--json");
    assert.equal(JSON.parse(json.stdout).sealed, true);
  } finally {
    kv.close();
    await Deno.remove(path);
  }
});

Deno.test("cli exits 2 with a message on bad usage, before any connection", async () => {
  const cases: [string[], RegExp][] = [
    [[], /name a command/],
    [["inspect", "--scope", "global", "--key", "k"], /name the store/],
    [["peek", "--kv", "x"], /unknown command "peek"/],
    [
      [
        "inspect",
        "--kv",
        "a",
        "--redis",
        "b",
        "--scope",
        "global",
        "--key",
        "k",
      ],
      /name one store/,
    ],
    [["inspect", "--kv", "a"], /name the record/],
    [["inspect", "--kv", "a", "--key", "k"], /name the record: --scope S/],
    [
      ["inspect", "--kv", "a", "--slot", "s", "--key", "k"],
      /give --slot, or --scope with --key/,
    ],
    [[
      "inspect",
      "--kv",
      "a",
      "--scope",
      "global",
      "--key",
      "k",
      "--secret-env",
      "CLI_UNSET",
    ], /CLI_UNSET is not set/],
    [
      [
        "inspect",
        "--kv",
        "a",
        "--scope",
        "global",
        "--key",
        "k",
        "--secret",
        "s",
      ],
      /unknown option "--secret"/,
    ],
    [["stats", "--kv", "a", "--key", "k"], /is for inspect and forget/],
    [
      ["stats", "--kv", "a", "--limit", "0"],
      /--limit must be a positive integer/,
    ],
    [["forget", "--kv", "a", "--slot", "s"], /add --yes/],
    [[
      "inspect",
      "--postgres",
      "postgres://h/db",
      "--prefix",
      "p:",
      "--slot",
      "s",
    ], /PostgreSQL takes --table/],
    [[
      "inspect",
      "--postgres",
      "postgres://h/db",
      "--table",
      "a.b.c",
      "--slot",
      "s",
    ], /'table' must be/],
    [
      ["inspect", "--sqlite", "a", "--prefix", "p:", "--slot", "s"],
      /SQLite takes --table/,
    ],
    [
      ["inspect", "--kv", "a", "--table", "t", "--slot", "s"],
      /--table is for --postgres, --mysql and --sqlite only/,
    ],
    [
      ["inspect", "--sqlite", "a", "--kv", "b", "--slot", "s"],
      /name one store, or --redis with --postgres \(a FailoverStore\): --kv and --sqlite given/,
    ],
    [["inspect", "--kv", "a", "--slot", "x".repeat(257)], /at most 256 bytes/],
    [
      ["inspect", "--kv", "a", "--scope", "s", "--key", "a,b"],
      /--key is not a key the middleware accepts/,
    ],
    [
      [
        "inspect",
        "--kv",
        "a",
        "--scope",
        "s",
        "--key",
        "k",
        "--secret-env",
        "CLI_SHORT",
      ],
      /CLI_SHORT: 'secret' must be at least 32 bytes/,
    ],
  ];
  for (const [args, message] of cases) {
    const run = await expectExit(2, ...args);
    assert.match(run.stderr, message, `cli ${args.join(" ")}`);
    assert.match(run.stderr, /--help/);
    assert.equal(run.stdout, "");
  }
});

/** The options the CLI's grammar has (docs/operations.md, the CLI). */
const OPTION_NAMES = [
  ..."json yes help global".split(" "),
  ..."redis redis-cluster postgres mysql kv sqlite dynamodb prefix table endpoint region scope key secret-env slot limit encryption-keys-env"
    .split(" "),
];

Deno.test("cli --help names every option and the exit codes; the parser knows each", async () => {
  const { stdout } = await expectExit(0, "--help");
  const named = new Set(stdout.match(/--[a-z][a-z-]*/g));
  named.delete("--allow-net"); // Deno's, in the permissions line
  for (
    const name of [
      "--allow-env",
      "--allow-read",
      "--allow-write",
      "--allow-sys",
      "--unstable-kv",
      "--generate-key",
      "--id", // generate-key's
    ]
  ) named.delete(name);
  assert.deepEqual([...named].sort(), OPTION_NAMES.map((n) => `--${n}`).sort());
  for (const name of OPTION_NAMES) {
    const lines: string[] = [];
    const io = {
      stdout: () => {},
      stderr: (l: string) => lines.push(l),
      env: () => undefined,
    };
    await main(["stats", `--${name}`], io);
    assert.doesNotMatch(lines.join("\n"), /unknown option/, name);
  }
  for (const code of ["0", "1", "2", "3"]) {
    assert.match(stdout, new RegExp(`^  ${code}  `, "m"));
  }
  assert.match(stdout, /--allow-net/);
});

Deno.test("cli exits 3 naming the server when it is unreachable", async () => {
  const port = freePort(); // closed: nobody listens there
  const redis = await expectExit(
    3,
    "stats",
    "--redis",
    `redis://127.0.0.1:${port}`,
  );
  assert.match(
    redis.stderr,
    new RegExp(`Redis at 127.0.0.1:${port}.*ECONNREFUSED`),
  );
  const pg = await expectExit(
    3,
    "inspect",
    "--postgres",
    `postgres://postgres:hunter2@127.0.0.1:${port}/test`,
    "--scope",
    "global",
    "--key",
    "k",
  );
  assert.match(
    pg.stderr,
    new RegExp(`PostgreSQL at 127.0.0.1:${port}.*ECONNREFUSED`),
  );
  assert.ok(!pg.stderr.includes("hunter2"), "the password is never shown");
  const missing = `${await Deno.makeTempDir()}/none.db`;
  const kv = await expectExit(3, "stats", "--kv", missing);
  assert.match(kv.stderr, /Deno KV at .*none\.db/);
  await assert.rejects(Deno.stat(missing), Deno.errors.NotFound);
});
