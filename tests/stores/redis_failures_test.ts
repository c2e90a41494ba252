// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore when Redis fails: node-redis not connected, ioredis unable to
 * reach it, a Redis that never answers, clients that throw, missed
 * deadlines, NOSCRIPT, a Redis before 7.0, bad options, and too few replica
 * acknowledgements (`waitReplicas`).
 *
 * node-redis and ioredis keep sockets and timers of their own (reconnect,
 * ping, offline queues) for a while after they close, so the tests that use
 * them turn the op and resource sanitizers off; the store's own timer is
 * checked with sanitizers on, on stub clients.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { Redis } from "ioredis";
import { type RedisCommander, RedisStore } from "../../src/stores/redis.ts";
import { StoreError } from "../../src/store.ts";
import { waitFor } from "../_support/services.ts";
import { isRelease, opts } from "./_redis_fixtures.ts";

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
