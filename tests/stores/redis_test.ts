// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore on the real Redis of this machine, with node-redis and ioredis:
 * the conformance suite, one round trip per operation (counted with
 * MONITOR), SCRIPT FLUSH mid-run, poisoned values, an unreachable and a hung
 * Redis, and the `@db/redis` adapter.
 *
 * node-redis and ioredis keep sockets and timers of their own (reconnect,
 * ping, offline queues) for a while after they close, so the tests that use
 * them turn the op and resource sanitizers off; the store's own timer is
 * checked with sanitizers on, on stub clients.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createClient } from "redis";
import { Command, Redis } from "ioredis";
import {
  type RedisClientLike,
  type RedisCommander,
  RedisStore,
} from "../../src/stores/redis.ts";
import { type StoredResponse, StoreError } from "../../src/store.ts";
import { storeConformance } from "../../src/testing.ts";
import {
  REDIS_IGNORE,
  REDIS_URL,
  startRedisServer,
  startTcpProxy,
  testName,
  uniquePrefix,
  waitFor,
} from "../_support/services.ts";
import {
  deleteRedisKeys,
  plantRedisPoison,
  REDIS_POISONS,
} from "../_support/redis.ts";
import { post } from "../_support/http.ts";
import { untilRunsAgain, warmCountingHandler } from "../_support/stores.ts";
import { Orphans } from "../../src/stores/_orphans.ts";
import { claimReply, SCRIPTS } from "../../src/stores/_redis_scripts.ts";
import { mayHaveRun } from "../../src/stores/_redis_client.ts";
import { completedRecord } from "../../src/stores/_redis_record.ts";

/** The token a native claim (`SET key <record> NX PX ttl GET`) offers. */
function claimToken(args: (string | Uint8Array)[]): string {
  const record = String(args[2]);
  return record.slice(record.indexOf(":") + 1);
}

/** Whether `args` is the release script (its token is `args[4]`). */
function isRelease(args: (string | Uint8Array)[]): boolean {
  return args[0] === "EVALSHA" && args[1] === SCRIPTS.release.sha;
}

const ignore = REDIS_IGNORE;
const opts = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 60_000 };
const encoder = new TextEncoder();

type NodeRedis = ReturnType<typeof createClient>;

async function nodeRedis(): Promise<NodeRedis> {
  const client = createClient({ url: REDIS_URL });
  client.on("error", () => {});
  await client.connect();
  return client;
}

function ioRedis(enableAutoPipelining = false): Redis {
  const client = new Redis(REDIS_URL, {
    lazyConnect: false,
    enableAutoPipelining,
  });
  client.on("error", () => {});
  return client;
}

/** A raw admin connection for planting values and cleaning up. */
class Admin {
  readonly client: Redis = ioRedis();

  poison(key: string, kind: string): Promise<void> {
    return plantRedisPoison(
      (args) => this.client.call(args[0] as string, ...args.slice(1)),
      key,
      kind,
    );
  }

  close(): void {
    this.client.disconnect();
  }
}

interface Opened {
  client: RedisClientLike;
  close(): void;
}

const clients: [string, () => Promise<Opened>][] = [
  ["node-redis", async () => {
    const client = await nodeRedis();
    return { client, close: () => client.destroy() };
  }],
  ["ioredis", () => {
    const client = ioRedis();
    return Promise.resolve({ client, close: () => client.disconnect() });
  }],
  // ioredis's callBuffer drops the command's name when auto-pipelining
  // (redis/ioredis#1923): the store sends through setBuffer, evalshaBuffer…
  ["ioredis, auto-pipelining", () => {
    const client = ioRedis(true);
    return Promise.resolve({ client, close: () => client.disconnect() });
  }],
];

for (const [label, make] of clients) {
  storeConformance({
    name: `RedisStore (${label})`,
    ignore,
    leaseMs: 200,
    async setup() {
      const { client, close } = await make();
      const admin = new Admin();
      const prefix = `${uniquePrefix(`conf_${label}`)}:`;
      const store = new RedisStore({ client, prefix });
      return {
        store,
        elapse: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
        poison: (slot, kind) => admin.poison(prefix + slot, kind),
        async teardown() {
          try {
            await deleteRedisKeys(prefix);
          } finally {
            close();
            admin.close();
          }
        },
      };
    },
  });
}

/**
 * Counts the commands one connection sends, with MONITOR on another: runs
 * `fn`, then an ECHO marker on the watched connection, and returns the
 * commands seen from its address in between.
 */
async function watch(
  client: RedisClientLike,
  address: string,
  fn: () => Promise<unknown>,
): Promise<string[]> {
  const seen: string[] = [];
  // A ready check (INFO) racing the MONITOR feed confuses ioredis.
  const base = new Redis(REDIS_URL, {
    enableReadyCheck: false,
    lazyConnect: true,
  });
  const monitor = await base.monitor();
  try {
    const marker = `marker-${crypto.randomUUID()}`;
    let onMarker!: () => void;
    const markerSeen = new Promise<void>((resolve) => (onMarker = resolve));
    let open = false;
    const start = `start-${crypto.randomUUID()}`;
    monitor.on(
      "monitor",
      (_time: string, args: string[], source: string) => {
        if (source !== address) return;
        const name = String(args[0]).toLowerCase();
        if (name === "echo" && args[1] === start) open = true;
        else if (name === "echo" && args[1] === marker) onMarker();
        else if (open) seen.push(name);
      },
    );
    await send(client, ["ECHO", start]);
    await fn();
    await send(client, ["ECHO", marker]);
    await markerSeen;
    return seen;
  } finally {
    monitor.disconnect();
    base.disconnect();
  }
}

/** Sends a raw command on either client. */
function send(client: RedisClientLike, args: string[]): Promise<unknown> {
  const c = client as unknown as {
    sendCommand: (a: unknown) => Promise<unknown>;
  };
  // ioredis: a Command through sendCommand, which no auto-pipelining touches
  // (its callBuffer drops the command's name then: redis/ioredis#1923).
  return client instanceof Redis
    ? c.sendCommand(new Command(args[0]!, args.slice(1)))
    : c.sendCommand(args);
}

/** The client's own address, as MONITOR names it. */
async function addressOf(client: RedisClientLike): Promise<string> {
  const info = String(await send(client, ["CLIENT", "INFO"]));
  const match = /(?:^| )addr=(\S+)/.exec(info);
  assert.ok(match, info);
  return match[1]!;
}

for (const [label, make] of clients) {
  Deno.test({
    name: testName(
      `RedisStore (${label}) makes one round trip per operation (two for a claim in flight), and recovers from SCRIPT FLUSH`,
      ignore,
    ),
    ignore: ignore !== false,
    // The Redis clients keep sockets and timers past close().
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      const { client, close } = await make();
      const admin = new Admin();
      const prefix = `${uniquePrefix(`rt_${label}`)}:`;
      const store = new RedisStore({ client, prefix });
      const address = await addressOf(client);
      const response: StoredResponse = {
        status: 201,
        headers: [["set-cookie", "a=1"]],
        body: new Uint8Array([0, 255, 1]),
      };
      try {
        // Make sure the scripts are loaded, so the counts below are the steady state.
        await store.release("warm", "x");
        const warm = await store.claim("warm", opts);
        if (warm.state === "acquired") {
          await store.extend("warm", warm.token, 1000);
          await store.complete("warm", warm.token, response);
        }

        await t.step(
          "a claim is one SET (and the claim script when in flight), each write one EVALSHA",
          async () => {
            let token = "";
            const cases: [string, () => Promise<unknown>][] = [
              ["claim (fresh)", async () => {
                const r = await store.claim("a", opts);
                assert.equal(r.state, "acquired");
                if (r.state === "acquired") token = r.token;
              }],
              ["claim (in flight)", async () => {
                assert.equal((await store.claim("a", opts)).state, "in_flight");
              }],
              ["extend", async () => {
                assert.equal(await store.extend("a", token, 5000), "applied");
              }],
              ["complete", async () => {
                assert.equal(
                  await store.complete("a", token, response),
                  "applied",
                );
              }],
              ["claim (replay, body included)", async () => {
                const r = await store.claim("a", opts);
                assert.equal(r.state, "completed");
                if (r.state === "completed") {
                  assert.deepEqual([...r.response.body!], [0, 255, 1]);
                }
              }],
              ["release (lost)", async () => {
                assert.equal(await store.release("a", token), "lost");
              }],
              ["release (applied)", async () => {
                const r = await store.claim("b", opts);
                assert.equal(r.state, "acquired");
                if (r.state === "acquired") {
                  assert.equal(await store.release("b", r.token), "applied");
                }
              }],
            ];
            const expected: Record<string, string[]> = {
              "claim (fresh)": ["set"],
              "claim (in flight)": ["set", "evalsha"],
              "claim (replay, body included)": ["set"],
              "release (applied)": ["set", "evalsha"],
            };
            for (const [name, fn] of cases) {
              const seen = await watch(client, address, fn);
              assert.deepEqual(seen, expected[name] ?? ["evalsha"], name);
            }
          },
        );

        await t.step(
          "after SCRIPT FLUSH an operation falls back to EVAL once, and works",
          async () => {
            const r = await store.claim("flush", opts);
            assert.equal(r.state, "acquired");
            if (r.state !== "acquired") return;
            await admin.client.script("FLUSH");
            const seen = await watch(client, address, async () => {
              assert.equal(
                await store.complete("flush", r.token, response),
                "applied",
              );
            });
            assert.deepEqual(seen, ["evalsha", "eval"]);
            // Each script is reloaded on its own first use; a replay needs none.
            await admin.client.script("FLUSH");
            assert.deepEqual(
              await watch(client, address, async () => {
                const replay = await store.claim("flush", opts);
                assert.equal(replay.state, "completed");
              }),
              ["set"],
            );
            assert.equal((await store.claim("flush2", opts)).state, "acquired");
            assert.deepEqual(
              await watch(client, address, async () => {
                const again = await store.claim("flush2", opts);
                assert.equal(again.state, "in_flight");
              }),
              ["set", "evalsha", "eval"],
            );
          },
        );

        await t.step(
          "the key carries the TTL of the first claim; complete keeps it",
          async () => {
            const r = await store.claim("ttl", { ...opts, ttlMs: 30_000 });
            assert.equal(r.state, "acquired");
            if (r.state !== "acquired") return;
            const before = await admin.client.pttl(`${prefix}ttl`);
            assert.ok(before > 29_000 && before <= 30_000, `${before}`);
            await new Promise((resolve) => setTimeout(resolve, 50));
            await store.extend("ttl", r.token, 10_000);
            await store.complete("ttl", r.token, response);
            const after = await admin.client.pttl(`${prefix}ttl`);
            assert.ok(after < before - 40 && after > 0, `${before} ${after}`);
            assert.equal(await admin.client.type(`${prefix}ttl`), "string");
          },
        );
      } finally {
        await deleteRedisKeys(prefix);
        close();
        admin.close();
      }
    },
  });
}

const POISONS = REDIS_POISONS;

for (const [label, make] of clients) {
  Deno.test({
    name: testName(
      `RedisStore (${label}) reads poisoned values of every kind as in flight and never overwrites them`,
      ignore,
    ),
    ignore: ignore !== false,
    // The Redis clients keep sockets and timers past close().
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const { client, close } = await make();
      const admin = new Admin();
      const prefix = `${uniquePrefix(`poison_${label}`)}:`;
      const store = new RedisStore({ client, prefix });
      try {
        for (const kind of POISONS) {
          const key = `${prefix}${kind}`;
          await admin.poison(key, kind);
          const before = await admin.client.dump(key);
          const seen = await store.claim(kind, { ...opts, leaseMs: 300 });
          assert.deepEqual(
            { ...seen, retryAfterMs: 0 },
            { state: "in_flight", fingerprint: null, retryAfterMs: 0 },
            kind,
          );
          if (seen.state === "in_flight") {
            assert.ok(
              seen.retryAfterMs >= 1 && seen.retryAfterMs <= 300,
              `${kind}: ${seen.retryAfterMs}`,
            );
          }
          // A token long enough to carry a fingerprint, so the scripts run.
          const t = "t".repeat(40);
          assert.equal(await store.extend(kind, t, 1000), "lost", kind);
          assert.equal(
            await store.complete(kind, t, {
              status: 200,
              headers: [],
              body: new Uint8Array(1),
            }),
            "lost",
            kind,
          );
          assert.equal(await store.release(kind, t), "lost", kind);
          assert.deepEqual(await admin.client.dump(key), before, kind);
        }
      } finally {
        await deleteRedisKeys(prefix);
        close();
        admin.close();
      }
    },
  });
}

Deno.test({
  name: "RedisStore throws StoreError at once when node-redis is not connected",
  // node-redis keeps its failed socket's handles for a moment.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const client = createClient({
      url: "redis://127.0.0.1:1",
      socket: { reconnectStrategy: false, connectTimeout: 500 },
    });
    client.on("error", () => {});
    await assert.rejects(() => client.connect());
    const store = new RedisStore({ client, timeoutMs: 5_000 });
    const error = await store.claim("s", opts).then(
      () => assert.fail("claim must throw"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof StoreError, String(error));
    assert.equal(error.operation, "claim");
    assert.ok(error.cause instanceof Error);
    // At once: the refusal itself, not the 5 s timeout.
    assert.doesNotMatch(error.message, /did not answer within/);
    const write = await store.complete("s", "t".repeat(40), {
      status: 200,
      headers: [],
      body: null,
      omitted: "cancelled",
    }).catch((e: unknown) => e);
    assert.ok(write instanceof StoreError && write.operation === "complete");
  },
});

Deno.test({
  name:
    "RedisStore throws StoreError within timeoutMs when ioredis cannot reach Redis",
  // ioredis keeps its reconnect timer until disconnect() takes effect.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const client = new Redis("redis://127.0.0.1:1", {
      retryStrategy: () => 200,
    });
    client.on("error", () => {});
    try {
      const store = new RedisStore({ client, timeoutMs: 300 });
      await assert.rejects(
        () => store.claim("s", opts),
        (error: unknown) =>
          error instanceof StoreError &&
          /did not answer within 300 ms/.test(error.message),
      );
    } finally {
      client.disconnect();
    }
  },
});

Deno.test({
  name:
    "RedisStore throws StoreError after timeoutMs when Redis accepts and never answers",
  // The clients keep timers and sockets past disconnect().
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const conns: Deno.Conn[] = [];
    const accepting = (async () => {
      for await (const conn of listener) conns.push(conn); // never answers
    })();
    const url = `redis://127.0.0.1:${listener.addr.port}`;
    const io = new Redis(url, {
      enableReadyCheck: false,
      maxRetriesPerRequest: null,
    });
    io.on("error", () => {});
    const node = createClient({ url, disableClientInfo: true });
    node.on("error", () => {});
    node.connect().catch(() => {});
    try {
      for (const client of [io, node]) {
        const store = new RedisStore({ client, timeoutMs: 200 });
        const started = performance.now();
        const error = await store.extend("s", "t", 100).catch((e) => e);
        const took = performance.now() - started;
        assert.ok(error instanceof StoreError, String(error));
        assert.equal(error.operation, "extend");
        assert.match(error.message, /within 200 ms/);
        assert.ok(took >= 190, `${took} ms`);
      }
    } finally {
      io.disconnect();
      node.destroy();
      listener.close();
      for (const conn of conns) conn.close();
      await accepting.catch(() => {});
    }
  },
});

Deno.test("RedisStore reports client failures and missed deadlines as StoreError", async () => {
  const answers: RedisCommander = { sendCommand: () => Promise.resolve(0) };
  assert.equal(
    await new RedisStore({ client: answers }).release("s", "t"),
    "lost",
  );
  const fails: RedisCommander = {
    sendCommand: () => Promise.reject(new Error("ECONNREFUSED")),
  };
  const error = await new RedisStore({ client: fails }).claim("s", opts)
    .catch((e) => e);
  assert.ok(error instanceof StoreError);
  assert.equal(error.operation, "claim");
  assert.equal((error.cause as Error).message, "ECONNREFUSED");
  const throws: RedisCommander = {
    sendCommand: () => {
      throw new Error("closed");
    },
  };
  await assert.rejects(
    () => new RedisStore({ client: throws }).claim("s", opts),
    StoreError,
  );
  // Calls started at different times each time out at their own deadline,
  // and the store keeps working after them.
  let hang = true;
  const sometimes: RedisCommander = {
    sendCommand: () => hang ? new Promise(() => {}) : Promise.resolve(1),
  };
  const store = new RedisStore({ client: sometimes, timeoutMs: 60 });
  const started = performance.now();
  const first = store.extend("s", "t", 100).catch((
    e,
  ) => [e, performance.now()]);
  await new Promise((resolve) => setTimeout(resolve, 30));
  const second = store.release("s", "t").catch((e) => [e, performance.now()]);
  const [[e1, t1], [e2, t2]] = await Promise.all([first, second]);
  assert.ok(e1 instanceof StoreError && e1.operation === "extend");
  assert.ok(e2 instanceof StoreError && e2.operation === "release");
  assert.match(e1.message, /within 60 ms/);
  // Each at its own deadline, never before it (how late a loaded machine
  // fires a timer is not asserted).
  assert.ok(t1 - started >= 55, `${t1 - started}`);
  assert.ok(t2 - started >= 85, `${t2 - started}`);
  hang = false;
  assert.equal((await store.claim("s", opts)).state, "acquired");
});

Deno.test("RedisStore's deadline timer never keeps a process alive", async () => {
  const source = `
    import { RedisStore } from ${
    JSON.stringify(new URL("../../src/stores/redis.ts", import.meta.url).href)
  };
    const store = new RedisStore({
      client: { sendCommand: () => Promise.resolve(null) },
      timeoutMs: 30_000,
    });
    await store.claim("s", { fingerprint: "f", leaseMs: 1000, ttlMs: 1000 });
  `;
  const started = performance.now();
  const { code } = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", source],
    stdout: "null",
    stderr: "inherit",
  }).output();
  assert.equal(code, 0);
  assert.ok(
    performance.now() - started < 10_000,
    "the process waited for the timer",
  );
});

Deno.test("RedisStore retries once with EVAL on NOSCRIPT, also after a '-' prefix", async () => {
  for (const prefix of ["", "-"]) {
    const sent: string[] = [];
    const client: RedisCommander = {
      sendCommand(args) {
        sent.push(String(args[0]));
        if (args[0] === "EVALSHA") {
          return Promise.reject(
            new Error(`${prefix}NOSCRIPT No matching script.`),
          );
        }
        return Promise.resolve(args[0] === "EVAL" ? 1 : null);
      },
    };
    const store = new RedisStore({ client });
    const r = await store.claim("s", opts);
    assert.equal(r.state, "acquired");
    assert.deepEqual(sent, ["SET"]);
    assert.equal(await store.release("s", "t".repeat(40)), "applied");
    assert.deepEqual(sent, ["SET", "EVALSHA", "EVAL"]);
  }
  const twice: RedisCommander = {
    sendCommand: () => Promise.reject(new Error("NOSCRIPT again")),
  };
  await assert.rejects(
    () => new RedisStore({ client: twice }).release("s", "t"),
    StoreError,
  );
});

Deno.test("RedisStore claims with the script from then on when the server refuses SET … NX … GET (Redis before 7.0)", async () => {
  const sent: string[] = [];
  const client: RedisCommander = {
    sendCommand(args) {
      sent.push(String(args[0]));
      if (args[0] === "SET") {
        return Promise.reject(new Error("ERR syntax error"));
      }
      return Promise.resolve(1);
    },
  };
  const store = new RedisStore({ client });
  assert.equal((await store.claim("s", opts)).state, "acquired");
  assert.equal((await store.claim("t", opts)).state, "acquired");
  assert.deepEqual(sent, ["SET", "EVALSHA", "EVALSHA"]);
});

Deno.test("RedisStore validates its options and arguments", async () => {
  const client: RedisCommander = { sendCommand: () => Promise.resolve(0) };
  assert.throws(
    () => new RedisStore({ client: {} as RedisCommander }),
    TypeError,
  );
  assert.throws(
    () => new RedisStore({ client: null as unknown as RedisCommander }),
    TypeError,
  );
  assert.throws(
    () => new RedisStore({ client, prefix: 1 as unknown as string }),
    TypeError,
  );
  assert.throws(() => new RedisStore({ client, timeoutMs: 0 }), RangeError);
  assert.throws(() => new RedisStore({ client, timeoutMs: 1.5 }), RangeError);
  const store = new RedisStore({ client });
  await assert.rejects(() => store.claim("", opts), TypeError);
  await assert.rejects(
    () => store.claim("s", { ...opts, leaseMs: -1 }),
    RangeError,
  );
  await assert.rejects(
    () => store.claim("s", { ...opts, ttlMs: Number.NaN }),
    RangeError,
  );
  await assert.rejects(() => store.extend("s", "t", 0), RangeError);
  await assert.rejects(
    () =>
      store.complete("s", "t", {
        status: 200,
        headers: [],
        body: null,
      }),
    TypeError,
  );
});

/** The shape of `@db/redis`'s `Redis.sendCommand`, without importing it. */
interface DbRedisLike {
  sendCommand(
    command: string,
    args?: (string | number | Uint8Array)[],
    options?: { returnUint8Arrays?: boolean },
  ): Promise<unknown>;
}

/** The README's adapter for `@db/redis`. */
function fromDbRedis(redis: DbRedisLike): RedisCommander {
  return {
    sendCommand: ([command, ...args]) =>
      redis.sendCommand(command as string, args, { returnUint8Arrays: true }),
  };
}

Deno.test({
  name: testName(
    "RedisStore works through the @db/redis adapter (a stand-in on ioredis)",
    ignore,
  ),
  ignore: ignore !== false,
  // ioredis keeps its socket's handles past disconnect().
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const io = ioRedis();
    const admin = new Admin();
    const prefix = `${uniquePrefix("dbredis")}:`;
    // A stand-in with @db/redis's signature; errors come as "-CODE message".
    const db: DbRedisLike = {
      async sendCommand(command, args = [], options) {
        assert.equal(options?.returnUint8Arrays, true);
        try {
          return await io.callBuffer(
            command,
            ...args.map((a) =>
              a instanceof Uint8Array
                ? Buffer.from(a.buffer, a.byteOffset, a.byteLength)
                : a
            ),
          );
        } catch (error) {
          throw new Error(`-${(error as Error).message}`);
        }
      },
    };
    const store = new RedisStore({ client: fromDbRedis(db), prefix });
    try {
      await admin.client.script("FLUSH");
      const r = await store.claim("s", opts);
      assert.equal(r.state, "acquired");
      if (r.state !== "acquired") return;
      const body = encoder.encode("héllo");
      assert.equal(
        await store.complete("s", r.token, { status: 200, headers: [], body }),
        "applied",
      );
      const replay = await store.claim("s", opts);
      assert.equal(replay.state, "completed");
      if (replay.state === "completed") {
        assert.deepEqual(replay.response.body, body);
      }
    } finally {
      await deleteRedisKeys(prefix);
      io.disconnect();
      admin.close();
    }
  },
});

// --- claims that time out leave nothing behind (rule 10) ---------------------
// On a redis-server of the test's own: a claim is sent while the server hangs
// (SIGSTOP: the server holds the claim) or while the client is cut off from
// it (a proxy drops the connection and refuses new ones: the client's offline
// queue holds the claim) past `timeoutMs`, and the middleware answers 503; then the
// server resumes and the claim lands late. The slot must not stay in flight for the lease: the next
// request with the key runs (polled, never waited for by time).

type Fault = "paused" | "disconnected";

interface LateClient {
  client: RedisClientLike;
  /** Whether the client knows it is connected. */
  ready(): boolean;
  close(): void;
}

const lateClients: [
  string,
  boolean,
  (url: string, queue: boolean) => Promise<LateClient>,
][] = [
  ["node-redis", true, lateNodeRedis],
  ["node-redis", false, lateNodeRedis],
  ["ioredis", true, lateIoRedis],
  ["ioredis", false, lateIoRedis],
];

async function lateNodeRedis(url: string, queue: boolean): Promise<LateClient> {
  const client = createClient({
    url,
    disableOfflineQueue: !queue,
    socket: { reconnectStrategy: () => 200 },
  });
  client.on("error", () => {});
  await client.connect();
  return { client, ready: () => client.isReady, close: () => client.destroy() };
}

async function lateIoRedis(url: string, queue: boolean): Promise<LateClient> {
  const client = new Redis(url, {
    enableOfflineQueue: queue,
    // Queued commands wait for the server, however long it takes.
    maxRetriesPerRequest: null,
    retryStrategy: () => 200,
    lazyConnect: true,
  });
  client.on("error", () => {});
  await client.connect();
  return {
    client,
    ready: () => client.status === "ready",
    close: () => client.disconnect(),
  };
}

async function lateClaimLeavesNothing(
  make: (url: string) => Promise<LateClient>,
  fault: Fault,
): Promise<void> {
  const server = await startRedisServer();
  // The client reaches the server through a proxy that can cut it off.
  const proxy = startTcpProxy(server.port);
  let close = () => {};
  try {
    const made = await make(`redis://127.0.0.1:${proxy.port}`);
    close = made.close;
    const store = new RedisStore({
      client: made.client,
      prefix: "late:",
      timeoutMs: 300,
    });
    // A warm server: it knows the claim script, so the late EVALSHA runs.
    const { handler, runs } = await warmCountingHandler(store);
    if (fault === "paused") {
      // The claim reaches a server that hangs: the server holds it.
      server.pause();
    } else {
      // The connection drops and stays down: the client holds the claim in
      // its offline queue.
      proxy.block();
      await waitFor(
        "the client to see its connection gone",
        () => !made.ready(),
      );
    }
    const failed = await handler(post("late-1"));
    assert.equal(failed.status, 503);
    await failed.body?.cancel();
    if (fault === "paused") server.resume();
    else proxy.unblock();
    await untilRunsAgain(handler, "late-1");
    assert.equal(runs(), 2);
    const replay = await handler(post("late-1"));
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    await replay.body?.cancel();
  } finally {
    close();
    proxy.close();
    await server.stop();
  }
}

for (const [label, queue, make] of lateClients) {
  const faults: Fault[] = queue ? ["paused", "disconnected"] : ["paused"];
  for (const fault of faults) {
    Deno.test({
      name: testName(
        `RedisStore (${label}, offline queue ${
          queue ? "on" : "off"
        }): a claim that timed out while Redis was ${fault} is undone when it lands`,
        ignore,
      ),
      ignore: ignore !== false,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => lateClaimLeavesNothing((url) => make(url, queue), fault),
    });
  }
}

Deno.test("RedisStore undoes a timed-out claim by its token when the late reply says acquired, and only then", async () => {
  // A client whose native claims hang until the test answers them, and
  // whose claim scripts do too once `holdScripts` is set; every release is
  // recorded with its token.
  const answers: ((reply: unknown) => void)[] = [];
  const scriptAnswers: ((reply: unknown) => void)[] = [];
  const sent: string[] = []; // the claims' tokens
  const releases: string[] = []; // the releases' tokens
  let holdScripts = false;
  let scripts = 0;
  const client: RedisCommander = {
    sendCommand(args) {
      if (args[0] === "SET") {
        sent.push(claimToken(args));
        return holdScripts
          ? Promise.resolve(new TextEncoder().encode(`idem2f100:${other}`))
          : new Promise((resolve) => answers.push(resolve));
      }
      if (isRelease(args)) {
        releases.push(String(args[4]));
        return Promise.resolve(1);
      }
      scripts++;
      return new Promise((resolve) => scriptAnswers.push(resolve));
    },
  };
  const other = "x".repeat(36) + "fp";
  const watched = new RedisStore({ client, timeoutMs: 30 });
  // Waits until the late replies are handled and any undo they queued has
  // gone out: a store call answered in time runs the undo queue at once, and
  // a turn of the event loop lets that run end. Then takes the probe out.
  const probe = "p".repeat(36) + "fp";
  const undosSent = async () => {
    await watched.release("probe", probe);
    await new Promise((resolve) => setTimeout(resolve, 0));
    releases.splice(releases.indexOf(probe), 1);
  };

  // Acquired late (nil): released, fenced by the claim's own token.
  await assert.rejects(() => watched.claim("s1", opts), StoreError);
  answers.shift()!(null);
  await waitFor("the undo", () => releases.length === 1);
  assert.deepEqual(releases, [sent[0]]);

  // Completed late, or in flight late: nothing to undo, and no claim script
  // is sent after the deadline (its takeover of a lapsed lease would end a
  // live owner's run when undone).
  await assert.rejects(() => watched.claim("s2", opts), StoreError);
  await assert.rejects(() => watched.claim("s3", opts), StoreError);
  answers.shift()!(new TextEncoder().encode(`idem2f100:${other}`));
  answers.shift()!(
    completedRecord(other, {
      status: 201,
      headers: [],
      body: null,
      omitted: "too_large",
    }),
  );
  await undosSent();
  assert.equal(scripts, 0);
  assert.equal(releases.length, 1);

  // The SET answered in time (in flight), the script did not: when it lands
  // with a takeover, that takeover is undone; when it says in flight, not.
  holdScripts = true;
  await assert.rejects(() => watched.claim("s4", opts), StoreError);
  await assert.rejects(() => watched.claim("s5", opts), StoreError);
  assert.equal(scripts, 2);
  scriptAnswers.shift()!(2);
  scriptAnswers.shift()!([0, "fp", 100]);
  await waitFor("the undo", () => releases.length === 2);
  assert.deepEqual(releases, [sent[0], sent[3]]);
  await undosSent();
  assert.equal(releases.length, 2);
});

Deno.test("RedisStore undoes a claim whose connection broke under it, not one the client refused to send", async () => {
  const releases: string[] = [];
  let failure = "Socket closed unexpectedly";
  const client: RedisCommander = {
    sendCommand(args) {
      if (args[0] === "SET") return Promise.reject(new Error(failure));
      releases.push(String(args[4]));
      return Promise.resolve(1);
    },
  };
  const store = new RedisStore({ client, timeoutMs: 1000 });
  await assert.rejects(() => store.claim("s1", opts), StoreError);
  await waitFor("the undo", () => releases.length === 1);
  assert.equal(releases.length, 1);
  for (
    failure of [
      "The client is offline",
      "Stream isn't writeable and enableOfflineQueue options is false",
      "NOSCRIPT No matching script.",
    ]
  ) {
    await assert.rejects(() => store.claim("s2", opts), StoreError);
  }
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(releases.length, 1);
});

Deno.test("RedisStore retries an undo that fails until Redis answers again", async () => {
  let down = true;
  let claims = 0;
  let releases = 0;
  const client: RedisCommander = {
    sendCommand(args) {
      if (down) return Promise.reject(new Error("Connection is closed."));
      if (args[0] === "SET") claims++;
      else if (isRelease(args)) releases++;
      return Promise.resolve(args[0] === "SET" ? null : 1);
    },
  };
  const store = new RedisStore({ client, timeoutMs: 1000 });
  await assert.rejects(() => store.claim("s1", opts), StoreError);
  // Redis is back: the next answer it gives kicks the pending undo.
  down = false;
  assert.equal((await store.claim("s2", opts)).state, "acquired");
  await waitFor("the undo", () => releases === 1);
  assert.equal(claims, 1);
});

Deno.test("The undo work of a store is bounded: the oldest entries go first", async () => {
  const released: string[] = [];
  const orphans = new Orphans((_slot, token) => {
    released.push(token);
    return Promise.resolve("applied");
  }, 3);
  const watched = Array.from(
    { length: 5 },
    (_, i) => orphans.watch("s", `t${i}`, 1000),
  );
  assert.equal(orphans.size, 3);
  orphans.cameBack(watched[0]!, "t0"); // dropped: nothing happens
  orphans.cameBack(watched[4]!, "t4");
  orphans.cameBack(watched[3]!, undefined);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(released, ["t4"]);
  assert.equal(orphans.size, 1); // t2, still out
});

Deno.test("A command Redis refused, or the client never sent, cannot have run; a broken connection may hide a run", () => {
  const refused = [
    "NOSCRIPT No matching script. Please use EVAL.",
    "-NOSCRIPT No matching script.",
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "ERR syntax error",
    "The client is offline",
    "The client is closed",
    "Stream isn't writeable and enableOfflineQueue options is false",
  ];
  for (const message of refused) {
    assert.equal(mayHaveRun(new Error(message)), false, message);
  }
  for (
    const message of [
      "Socket closed unexpectedly",
      "Connection is closed.",
      "ERR Error running script",
    ]
  ) {
    assert.equal(mayHaveRun(new Error(message)), true, message);
  }
  assert.equal(mayHaveRun("not an error"), true);
});

Deno.test({
  name: testName(
    "RedisStore's lease floor is ttl − lease on claim and PTTL − lease on extend, and every write keeps the key's TTL",
    ignore,
  ),
  ignore: ignore !== false,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const admin = new Admin();
    const prefix = `${uniquePrefix("floor")}:`;
    const store = new RedisStore({ client: admin.client, prefix });
    const raw = async (slot: string) =>
      String(await admin.client.get(prefix + slot));
    const pttl = (slot: string) => admin.client.pttl(prefix + slot);
    try {
      const claim = await store.claim("a", opts);
      assert.equal(claim.state, "acquired");
      if (claim.state !== "acquired") return;
      // The claim's floor: exactly ttl − lease, the lease on the server's clock.
      assert.equal(
        await raw("a"),
        `idem2f${opts.ttlMs - opts.leaseMs}:${claim.token}`,
      );
      const held = await store.claim("a", opts);
      assert.equal(held.state, "in_flight");
      if (held.state !== "in_flight") return;
      // The hint is what is left of the lease (PTTL − floor), not the TTL.
      assert.ok(held.retryAfterMs <= opts.leaseMs, `${held.retryAfterMs}`);
      assert.ok(
        held.retryAfterMs > opts.leaseMs - 1_000,
        `${held.retryAfterMs}`,
      );

      const before = await pttl("a");
      assert.equal(await store.extend("a", claim.token, 20_000), "applied");
      const after = await pttl("a");
      const floor = Number(/^idem2f(\d+):/.exec(await raw("a"))?.[1]);
      // extend's floor is PTTL − lease, read between the two PTTLs around it.
      assert.ok(
        floor + 20_000 <= before && floor + 20_000 >= after,
        `${floor}`,
      );
      assert.ok(after > 0 && after <= before, `extend keeps the TTL: ${after}`);
      const extended = await store.claim("a", opts);
      assert.equal(extended.state, "in_flight");
      if (extended.state === "in_flight") {
        assert.ok(extended.retryAfterMs > 19_000, `${extended.retryAfterMs}`);
        assert.ok(extended.retryAfterMs <= 20_000, `${extended.retryAfterMs}`);
      }

      const omitted: StoredResponse = {
        status: 200,
        headers: [["x-a", "1"]],
        body: null,
        omitted: "too_slow",
      };
      assert.equal(await store.complete("a", claim.token, omitted), "applied");
      const completed = await pttl("a");
      assert.ok(
        completed > 0 && completed <= after,
        `complete keeps the TTL (KEEPTTL): ${completed}`,
      );
      // The record of an omitted body replays as omitted, with its reason.
      const replay = await store.claim("a", opts);
      assert.equal(replay.state, "completed");
      if (replay.state === "completed") {
        assert.deepEqual(replay.response, omitted);
      }
    } finally {
      await deleteRedisKeys(prefix);
      admin.close();
    }
  },
});

Deno.test({
  name: testName(
    "RedisStore hints a value it cannot read at the lease, or at its TTL when that ends sooner",
    ignore,
  ),
  ignore: ignore !== false,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const admin = new Admin();
    const prefix = `${uniquePrefix("hint")}:`;
    const store = new RedisStore({ client: admin.client, prefix });
    const hint = async (slot: string) => {
      const claim = await store.claim(slot, opts);
      assert.equal(claim.state, "in_flight", slot);
      assert.equal(claim.state === "in_flight" && claim.fingerprint, null);
      return claim.state === "in_flight" ? claim.retryAfterMs : NaN;
    };
    try {
      await admin.client.set(`${prefix}no-ttl`, "foreign");
      await admin.client.set(`${prefix}long`, "foreign", "PX", 60_000);
      await admin.client.set(`${prefix}short`, "foreign", "PX", 1_500);
      assert.equal(await hint("no-ttl"), opts.leaseMs);
      assert.equal(await hint("long"), opts.leaseMs);
      const short = await hint("short");
      assert.ok(short <= 1_500 && short > 500, `${short}`);
    } finally {
      await deleteRedisKeys(prefix);
      admin.close();
    }
  },
});

Deno.test("RedisStore reads the claim script's replies: acquired from recovered, in-flight hints at least 1 ms", () => {
  const token = "t".repeat(36) + "fp";
  assert.deepEqual(claimReply(1, token, 5_000), {
    state: "acquired",
    token,
    recovered: false,
  });
  assert.deepEqual(claimReply(2, token, 5_000), {
    state: "acquired",
    token,
    recovered: true,
  });
  for (const [left, expected] of [[2, 2], [1, 1], [0, 1], [-3, 1]]) {
    assert.deepEqual(claimReply([0, "fp", left], token, 5_000), {
      state: "in_flight",
      fingerprint: "fp",
      retryAfterMs: expected,
    }, `${left}`);
  }
  // Unreadable, with the script's hint or else the lease.
  assert.deepEqual(claimReply([2, 1_200], token, 5_000), {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: 1_200,
  });
  assert.deepEqual(claimReply([2, 0], token, 5_000), {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: 5_000,
  });
  assert.deepEqual(claimReply([3, "garbage", 700], token, 5_000), {
    state: "in_flight",
    fingerprint: null,
    retryAfterMs: 700,
  });
});

Deno.test("RedisStore's waitReplicas: n − 1 acknowledgements undo the claim, n and n + 1 keep it; WAIT blocks 500 ms by default", async () => {
  const sent: string[][] = [];
  let acks = 0;
  const client: RedisCommander = {
    sendCommand(args) {
      const command = args.map(String);
      sent.push(command);
      if (command[0] === "SET") return Promise.resolve(null);
      if (command[0] === "WAIT") return Promise.resolve(acks);
      return Promise.resolve(1); // EVALSHA: applied
    },
  };
  const waits = () => sent.filter((c) => c[0] === "WAIT");
  const releases = () => sent.filter((c) => isRelease(c));

  const none = new RedisStore({ client, waitReplicas: 0 });
  assert.equal((await none.claim("s", opts)).state, "acquired");
  assert.equal(waits().length, 0, "waitReplicas: 0 sends no WAIT");

  const store = new RedisStore({ client, waitReplicas: 2 });
  for (const n of [2, 3]) {
    acks = n;
    const claim = await store.claim("s", opts);
    assert.equal(claim.state, "acquired", `${n} acknowledged`);
    if (claim.state === "acquired") {
      acks = n;
      const response = { status: 200, headers: [], body: new Uint8Array(0) };
      assert.equal(await store.complete("s", claim.token, response), "applied");
    }
  }
  assert.deepEqual(waits().at(-1), ["WAIT", "2", "500"]);
  assert.equal(waits().length, 4, "after each claim and each completion");
  assert.equal(releases().length, 0);

  acks = 1;
  await assert.rejects(
    () => store.claim("s", opts),
    (error: unknown) =>
      error instanceof StoreError &&
      /acknowledged by 1 of 2/.test(error.message),
  );
  await waitFor("the claim to be undone", () => releases().length === 1);

  const quick = new RedisStore({ client, waitReplicas: 1, waitTimeoutMs: 1 });
  acks = 1;
  assert.equal((await quick.claim("s", opts)).state, "acquired");
  assert.deepEqual(waits().at(-1), ["WAIT", "1", "1"]);
  for (const bad of [-1, 1.5]) {
    assert.throws(
      () => new RedisStore({ client, waitReplicas: bad }),
      RangeError,
    );
  }
  assert.throws(() => new RedisStore({ client, waitTimeoutMs: 0 }), RangeError);
  assert.ok(new RedisStore({ client, timeoutMs: 1 }));
});
