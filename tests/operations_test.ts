// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The runbook of docs/operations.md, re-run as written: each situation is
 * made real here, with the README's wiring, and its block is run in it.
 *
 * The app is tests/_support/operations_app.ts (the README's store snippets,
 * the examples' payments handler and the README's `/otel` wiring, nothing
 * else), run as a subprocess under `OTEL_DENO=true` with its metrics sent to
 * an OTLP/HTTP JSON receiver served here. A situation that stops a server
 * runs its own (a redis-server, a PostgreSQL cluster, on free ports): the
 * shared servers are never touched.
 *
 * ## The grammar of a runbook block
 *
 * A runbook block is a `sh` block preceded by
 * `<!-- readme-test: runbook NAME -->`, NAME one of {@linkcode SITUATIONS}'
 * names; each situation has exactly one. Its lines, in order, are steps,
 * each checked before the next:
 *
 * - `# answer: STATUS [problem-ANCHOR] [replayed] [without Retry-After]`:
 *   the situation's keyed request (the same request every time: `POST
 *   /payments` with `$KEY` as `acct_1`) is sent now and gets STATUS; with an
 *   anchor, a problem whose `type` ends in `#problem-ANCHOR`; `replayed`
 *   exactly when the answer is a replay (`Idempotent-Replayed: true`); with
 *   `without Retry-After`, no such header.
 * - `# log: TEXT`: the app wrote a line TEXT (`…` matches anything): waited
 *   for, within 30 s. `# no log: TEXT`: it wrote no such line so far.
 * - `# metric: NAME [ATTRIBUTE=VALUE …]`: the app exported a data point of
 *   NAME, above 0, with those attributes: waited for, within 30 s.
 * - `# once: TEXT`: the change TEXT happens (the situation must know TEXT:
 *   a server comes back, the app is redeployed) and is waited for.
 * - `NAME="value"`: sets `$NAME` (`$OTHER` expanded in the value).
 * - `idem …`: `@idempotent/http/cli` (this checkout's `./cli` entry, as the
 *   alias of the command-line section runs it), `$NAME` expanded (unquoted,
 *   into words), with the situation's app environment (its encryption keys)
 *   beside the test's. It must exit 0, or N when `# exit N` follows it; the
 *   other `# ` lines after it must each equal a line of its stdout, then
 *   stderr, in order (`…` matches anything).
 *
 * Any other line fails the block. The situations define `$REDIS_URL` and
 * `$DATABASE_URL` (their servers) and `$KEY`, as each says.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fencedBlocks } from "./_support/markdown.ts";
import {
  otelEnv,
  type OtlpReceiver,
  startOtlpReceiver,
} from "./_support/otlp.ts";
import {
  type App,
  runBlock,
  runbookBlocks,
  type Situation,
  startApp,
  stepsOf,
} from "./_support/runbook.ts";
import {
  integrationTest,
  type PrivateRedis,
  redisServerIgnore,
  startPostgresServer,
  startRedisServer,
  waitFor,
} from "./_support/services.ts";
import { slotOf } from "../src/fingerprint.ts";

const DOC = "docs/operations.md";
const text = await Deno.readTextFile(new URL(`../${DOC}`, import.meta.url));
const blocks = runbookBlocks(fencedBlocks(text, DOC));
const IGNORE = await redisServerIgnore();

/** The scope of `acct_1`'s requests (examples/_payments.ts's `accountOf`). */
const SCOPE = "acct_1";

/** A situation's set-up: it makes the situation, runs `block`, cleans up. */
type Setup = (block: (situation: Situation) => Promise<void>) => Promise<void>;

/** A receiver and a base environment for an app that exports to it. */
function telemetry(): { receiver: OtlpReceiver; env: Record<string, string> } {
  const receiver = startOtlpReceiver();
  return { receiver, env: otelEnv(receiver, "idempotency-runbook") };
}

/**
 * Waits until the app serves a new key through Redis again (its record is
 * in Redis): its client reconnected and its scripts are loaded.
 */
function servedByRedis(app: App, redis: PrivateRedis): Promise<void> {
  return waitFor("the app to serve through Redis again", async () => {
    const probe = crypto.randomUUID();
    if ((await app.pay(probe, "sk_test_bob")).status !== 201) return false;
    const record = `idempotency:${slotOf("acct_2", probe)}`;
    return await redis.cli("EXISTS", record) === "1";
  });
}

/** Waits until a request with a key of its own gets its 201 (the app serves again). */
async function serving(app: App): Promise<void> {
  let last = "";
  try {
    await waitFor("the app to serve keyed requests again", async () => {
      const answer = await app.pay(crypto.randomUUID(), "sk_test_bob");
      last = `${answer.status} ${answer.body}`;
      return answer.status === 201;
    });
  } catch (error) {
    throw new Error(
      `${(error as Error).message}: the last answer ${last}; the app wrote:\n${
        app.lines.join("\n")
      }`,
    );
  }
}

/** 32 random bytes as base64: an AES-256 key, as `IDEMPOTENCY_KEYS` holds it. */
function randomKey(): string {
  return btoa(
    String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))),
  );
}

/**
 * The six situations, by the names their blocks give. Each starts what it
 * stops, in `finally`.
 */
export const SITUATIONS: Record<string, Setup> = {
  /**
   * `$KEY` completed; then Redis (no persistence) stopped under the README's
   * RedisStore.
   */
  async "store-unreachable"(block) {
    await using redis = await startRedisServer();
    const { receiver, env } = telemetry();
    await using _ = receiver;
    const base = { ...env, RUNBOOK_STORE: "redis", REDIS_URL: redis.url };
    const app = await startApp(base);
    try {
      const key = crypto.randomUUID();
      assert.equal((await app.pay(key)).status, 201);
      await redis.kill();
      await block({
        vars: { REDIS_URL: redis.url, KEY: key },
        app: () => app,
        receiver,
        request: (a) => a.pay(key),
        once: {
          async "Redis is back"() {
            await redis.restart(); // it answers PING
            await serving(app); // the client reconnected by itself
          },
        },
      });
    } finally {
      await app.stop();
    }
  },

  /**
   * `$KEY` ran once and the customer's retry came with another key (two
   * payments); `$EXPIRED_KEY`'s record expired (its TTL cut to 1 ms).
   */
  async "duplicate-reported"(block) {
    await using redis = await startRedisServer();
    const { receiver, env } = telemetry();
    await using _ = receiver;
    const app = await startApp({
      ...env,
      RUNBOOK_STORE: "redis",
      REDIS_URL: redis.url,
    });
    try {
      const [key, retryKey, expired] = [1, 2, 3].map(() => crypto.randomUUID());
      for (const k of [key!, retryKey!, expired!]) {
        assert.equal((await app.pay(k)).status, 201);
      }
      const record = `myapp:idem:${slotOf(SCOPE, expired!)}`;
      assert.equal(await redis.cli("PEXPIRE", record, "1"), "1");
      await waitFor(
        "the record to expire",
        async () => await redis.cli("EXISTS", record) === "0",
      );
      await block({
        vars: { REDIS_URL: redis.url, KEY: key!, EXPIRED_KEY: expired! },
        app: () => app,
        receiver,
        request: (a) => a.pay(key!),
      });
    } finally {
      await app.stop();
    }
  },

  /** `$KEY`'s handler hangs (its payment provider never answers). */
  async "stuck-409"(block) {
    await using redis = await startRedisServer();
    const { receiver, env } = telemetry();
    await using _ = receiver;
    const app = await startApp({
      ...env,
      RUNBOOK_STORE: "redis",
      REDIS_URL: redis.url,
      RUNBOOK_HANG: "1",
    });
    try {
      const key = crypto.randomUUID();
      const hung = app.pay(key).catch(() => null); // it ends with the app
      await app.waitForLine("handler entered");
      await block({
        vars: { REDIS_URL: redis.url, KEY: key },
        app: () => app,
        receiver,
        request: (a) => a.pay(key),
      });
      await app.stop();
      await hung;
    } finally {
      await app.stop();
    }
  },

  /** Redis killed under the README's FailoverStore (PostgreSQL behind it). */
  async "redis-down"(block) {
    await using redis = await startRedisServer();
    const pg = await startPostgresServer();
    const { receiver, env } = telemetry();
    try {
      await using _ = receiver;
      const app = await startApp({
        ...env,
        RUNBOOK_STORE: "failover",
        REDIS_URL: redis.url,
        DATABASE_URL: pg.url,
      });
      try {
        const key = crypto.randomUUID();
        await redis.kill();
        await block({
          vars: { REDIS_URL: redis.url, DATABASE_URL: pg.url, KEY: key },
          app: () => app,
          receiver,
          request: (a) => a.pay(key),
          once: {
            async "Redis is back, empty"() {
              await redis.restart();
              await servedByRedis(app, redis);
            },
          },
        });
      } finally {
        await app.stop();
      }
    } finally {
      await pg.stop();
    }
  },

  /** PostgreSQL stopped under the README's PostgresStore. */
  async "postgres-down"(block) {
    const pg = await startPostgresServer();
    const { receiver, env } = telemetry();
    try {
      await using _ = receiver;
      const app = await startApp({
        ...env,
        RUNBOOK_STORE: "postgres",
        DATABASE_URL: pg.url,
      });
      try {
        const key = crypto.randomUUID();
        await pg.halt();
        await block({
          vars: { DATABASE_URL: pg.url, KEY: key },
          app: () => app,
          receiver,
          request: (a) => a.pay(key),
          once: {
            async "PostgreSQL is back"() {
              await pg.restart();
              await serving(app);
            },
          },
        });
      } finally {
        await app.stop();
      }
    } finally {
      await pg.stop();
    }
  },

  /**
   * `$KEY` completed under an app sealing with `k1`; the app was redeployed
   * with `IDEMPOTENCY_KEYS` listing `k2` only.
   */
  async "unreadable-after-deploy"(block) {
    await using redis = await startRedisServer();
    const { receiver, env } = telemetry();
    await using _ = receiver;
    const base = { ...env, RUNBOOK_STORE: "redis", REDIS_URL: redis.url };
    const [k1, k2] = [`k1:${randomKey()}`, `k2:${randomKey()}`];
    const key = crypto.randomUUID();
    const first = await startApp({ ...base, IDEMPOTENCY_KEYS: k1 });
    try {
      assert.equal((await first.pay(key)).status, 201);
    } finally {
      await first.stop();
    }
    let keys = k2;
    let app = await startApp({ ...base, IDEMPOTENCY_KEYS: keys });
    try {
      await block({
        vars: { REDIS_URL: redis.url, KEY: key },
        get env() {
          return { IDEMPOTENCY_KEYS: keys };
        },
        app: () => app,
        receiver,
        request: (a) => a.pay(key),
        once: {
          async "the app lists k1 again, second"() {
            await app.stop();
            keys = `${k2},${k1}`;
            app = await startApp({ ...base, IDEMPOTENCY_KEYS: keys });
          },
        },
      });
    } finally {
      await app.stop();
    }
  },
};

Deno.test("docs/operations.md has one runbook block for each situation here, and no other", () => {
  const names = [...blocks.keys()];
  assert.deepEqual(
    names.filter((n) => !(n in SITUATIONS)),
    [],
    `${DOC}: runbook blocks that name no situation of tests/operations_test.ts`,
  );
  assert.deepEqual(
    Object.keys(SITUATIONS).filter((n) => !blocks.has(n)),
    [],
    `${DOC}: situations with no runbook block`,
  );
  for (const [name, found] of blocks) {
    assert.equal(found.length, 1, `${DOC}: ${found.length} blocks for ${name}`);
    assert.equal(found[0]!.lang, "sh", `${DOC}:${found[0]!.line}: a sh block`);
    stepsOf(found[0]!.text); // throws on a line the grammar lacks
  }
});

Deno.test("stepsOf() reads the grammar, and refuses what it lacks", () => {
  const steps = stepsOf([
    "# answer: 409 problem-key-in-flight",
    "# answer: 201 replayed",
    "# answer: 500 problem-x without Retry-After",
    "# log: [@idempotent/http] store_error: …",
    "# no log: [@idempotent/http] fallback: …",
    "# metric: idempotency.requests idempotency.outcome=conflict",
    "# once: Redis is back",
    'STORE="--redis $REDIS_URL"',
    'idem inspect $STORE --key "$KEY"',
    "#   state  absent: …",
    "# exit 1",
  ].join("\n"));
  assert.deepEqual(steps.map((s) => s.kind), [
    "answer",
    "answer",
    "answer",
    "log",
    "no log",
    "metric",
    "once",
    "set",
    "idem",
  ]);
  assert.deepEqual(steps[0], {
    kind: "answer",
    status: 409,
    problem: "problem-key-in-flight",
    replayed: false,
    noRetryAfter: false,
    line: "# answer: 409 problem-key-in-flight",
  });
  assert.equal((steps[1] as { replayed: boolean }).replayed, true);
  assert.deepEqual(
    [
      (steps[2] as { problem: string }).problem,
      (steps[2] as { noRetryAfter: boolean }).noRetryAfter,
    ],
    ["problem-x", true],
  );
  assert.deepEqual((steps[5] as { where: unknown }).where, {
    "idempotency.outcome": "conflict",
  });
  assert.deepEqual(steps[8], {
    kind: "idem",
    command: 'idem inspect $STORE --key "$KEY"',
    exit: 1,
    expected: ["  state  absent: …"],
    line: 'idem inspect $STORE --key "$KEY"',
  });
  for (
    const bad of [
      "# a remark",
      "curl -i x",
      "# answer: fine",
      "# answer: 201 without retry-after",
      "# exit 3",
      "# metric: a =b",
    ]
  ) {
    assert.throws(() => stepsOf(bad), SyntaxError, bad);
  }
});

for (const [name, setup] of Object.entries(SITUATIONS)) {
  integrationTest(`${DOC} runbook: ${name}, as written`, IGNORE, async () => {
    const [block] = blocks.get(name) ?? [];
    assert.ok(block !== undefined, `${DOC}: no runbook block for ${name}`);
    await setup(async (situation) => {
      situation.receiver.points.length = 0; // what the set-up exported
      await runBlock(`${DOC}:${block.line}`, block.text, situation);
    });
  });
}
