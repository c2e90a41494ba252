// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What a RedisStore's missed deadline says, on a redis-server of the test's
 * own: a client reconnecting to a stopped server names that state and to
 * check the server and URL; a client connected to a paused server names
 * that and the latency; node-redis and ioredis each in their own words
 * (`isReady`, `status`). Sanitizers off: both clients keep sockets and
 * timers a while after they close.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createClient } from "redis";
import { Redis } from "ioredis";
import { RedisStore } from "../../src/stores/redis.ts";
import { StoreError } from "../../src/store.ts";
import {
  integrationTest,
  redisServerIgnore,
  startRedisServer,
} from "../_support/services.ts";
import { waitFor } from "../_support/time.ts";

const options = { fingerprint: "f", leaseMs: 1_000, ttlMs: 1_000 };

/** The message of the StoreError a claim on `store` throws. */
async function claimError(store: RedisStore): Promise<string> {
  const error = await store.claim("s", options).then(
    () => assert.fail("a claim on a server that cannot answer succeeded"),
    (error: unknown) => error,
  );
  assert.ok(error instanceof StoreError, String(error));
  return error.message;
}

const REACH =
  /: Redis is unreachable; check that it runs and the client's URL$/;
const SLOW =
  /but Redis did not answer: it is overloaded, blocked by a slow command or paused; check `redis-cli --latency` and SLOWLOG, or raise 'timeoutMs'$/;

integrationTest(
  "node-redis: a timeout while the client reconnects names isReady false and the fix; on a paused server, isReady true and the latency",
  await redisServerIgnore(),
  async () => {
    await using server = await startRedisServer();
    // The offline queue on (the default): commands wait for the reconnect.
    const client = createClient({
      url: server.url,
      socket: { reconnectStrategy: () => 50, connectTimeout: 500 },
    });
    client.on("error", () => {});
    await client.connect();
    try {
      const store = new RedisStore({ client, timeoutMs: 300 });
      assert.equal((await store.claim("warm", options)).state, "acquired");
      server.pause();
      try {
        const paused = await claimError(store);
        assert.match(
          paused,
          /^Redis claim did not answer within 300 ms: the Redis client is connected \(node-redis `isReady` true\) /,
        );
        assert.match(paused, SLOW);
      } finally {
        server.resume();
      }
      await server.kill();
      await waitFor("the client to notice", () => !client.isReady);
      const reconnecting = await claimError(store);
      assert.match(
        reconnecting,
        /^Redis claim did not answer within 300 ms: the Redis client is connecting or reconnecting \(node-redis `isReady` false\)/,
      );
      assert.match(reconnecting, REACH);
    } finally {
      client.destroy();
    }
  },
);

/**
 * A node-redis client with no `error` listener, in a process of its own (its
 * unheard error is thrown out of the socket's handler, which must not land in
 * this runner): it claims once Redis is gone and prints the store's message.
 */
const DEAF_APP = `
import { createClient } from "redis";
import { RedisStore } from "${
  new URL("../../src/stores/redis.ts", import.meta.url).href
}";
const swallow = (e) => e.preventDefault();
globalThis.addEventListener("error", swallow);
globalThis.addEventListener("unhandledrejection", swallow);
const client = createClient({ url: Deno.args[0], disableOfflineQueue: true });
await client.connect();
const store = new RedisStore({ client, timeoutMs: 300 });
console.log("ready");
while (client.isReady) await new Promise((r) => setTimeout(r, 10));
const options = { fingerprint: "fp", leaseMs: 1000, ttlMs: 60000 };
try {
  await store.claim("deaf", options);
  console.log("claimed");
} catch (error) {
  console.log(error.message);
}
Deno.exit(0);
`;

integrationTest(
  "node-redis without an 'error' listener: a failure once Redis is gone says it will not reconnect and to add one; with a listener, it does not",
  await redisServerIgnore(),
  async () => {
    await using server = await startRedisServer();
    const dir = await Deno.makeTempDir({ prefix: "deaf_" });
    const script = `${dir}/deaf.ts`;
    await Deno.writeTextFile(script, DEAF_APP);
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
        script,
        server.url,
      ],
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const heard = createClient({ url: server.url, disableOfflineQueue: true });
    heard.on("error", () => {});
    await heard.connect();
    try {
      const lines = child.stdout.pipeThrough(new TextDecoderStream())
        .getReader();
      let out = "";
      while (!out.includes("ready\n")) {
        const { value, done } = await lines.read();
        if (done) break;
        out += value;
      }
      assert.ok(out.includes("ready\n"), out);
      const heardStore = new RedisStore({ client: heard, timeoutMs: 300 });
      await server.kill();
      for (;;) {
        const { value, done } = await lines.read();
        if (done) break;
        out += value;
      }
      const told = out.split("\n")[1] ?? "";
      assert.match(
        told,
        /has no 'error' listener .* will not reconnect by itself/,
      );
      assert.match(told, /add `client\.on\("error", …\)` before `connect\(\)`/);
      await waitFor("the client to notice", () => !heard.isReady);
      const other = await claimError(heardStore);
      assert.doesNotMatch(other, /'error' listener/);
      assert.match(other, REACH);
    } finally {
      heard.destroy();
      try {
        child.kill();
      } catch {
        // It exited.
      }
      await child.status;
      await Deno.remove(dir, { recursive: true });
    }
  },
);

integrationTest(
  "ioredis: a timeout while the client reconnects names its status and the fix; on a paused server, status ready and the latency",
  await redisServerIgnore(),
  async () => {
    await using server = await startRedisServer();
    const client = new Redis(server.url, { retryStrategy: () => 50 });
    client.on("error", () => {});
    try {
      await waitFor("ioredis to be ready", () => client.status === "ready");
      const store = new RedisStore({ client, timeoutMs: 300 });
      assert.equal((await store.claim("warm", options)).state, "acquired");
      server.pause();
      try {
        const paused = await claimError(store);
        assert.match(
          paused,
          /^Redis claim did not answer within 300 ms: the Redis client is connected \(ioredis `status` "ready"\) /,
        );
        assert.match(paused, SLOW);
      } finally {
        server.resume();
      }
      await server.kill();
      await waitFor("ioredis to notice", () => client.status !== "ready");
      const reconnecting = await claimError(store);
      assert.match(
        reconnecting,
        /^Redis claim did not answer within 300 ms: the Redis client is reconnecting \(ioredis `status` "(reconnecting|connecting|connect)"\)/,
      );
      assert.match(reconnecting, REACH);
    } finally {
      client.disconnect();
    }
  },
);
