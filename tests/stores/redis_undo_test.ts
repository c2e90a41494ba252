// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore leaves nothing behind (rule 10): a claim that timed out is
 * undone when it lands late, on a redis-server of the test's own that is
 * paused or cut off, and on stub clients; undo work is retried and bounded;
 * which failures may hide a run.
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
import {
  type RedisClientLike,
  type RedisCommander,
  RedisStore,
} from "../../src/stores/redis.ts";
import { StoreError } from "../../src/store.ts";
import {
  startRedisServer,
  startTcpProxy,
  testName,
  waitFor,
} from "../_support/services.ts";
import { post } from "../_support/http.ts";
import { untilRunsAgain, warmCountingHandler } from "../_support/stores.ts";
import { Orphans } from "../../src/stores/_orphans.ts";
import { mayHaveRun } from "../../src/stores/_redis_client.ts";
import { completedRecord } from "../../src/stores/_redis_record.ts";
import { ignore, isRelease, opts } from "./_redis_fixtures.ts";

/** The token a native claim (`SET key <record> NX PX ttl GET`) offers. */
function claimToken(args: (string | Uint8Array)[]): string {
  const record = String(args[2]);
  return record.slice(record.indexOf(":") + 1);
}

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
