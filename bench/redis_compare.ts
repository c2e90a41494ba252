// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * RedisStore against the peers a user would otherwise pick, in one run on one
 * Redis, one connection each: the cost of a request with a fresh key
 * (claim + complete) and of a replay (claim), as p50/p99 over sequential
 * calls, calls/s with 32 in flight, and Redis round trips per request
 * counted with MONITOR.
 *
 * ```sh
 * deno task bench:compare [--n=5000] [--seconds=3] [--rounds=10] [--only=name,...]
 * ```
 *
 * The peers' packages are in the benchmarks' own import map (`bench/deno.json`,
 * a workspace member), never in the library's `deno.json` imports.
 *
 * What one "request" is for RedisStore (fenced writes, lease, bytes), for
 * MemoryStore (the same calls in process) and for each peer: see
 * `_peers.ts`. Besides them:
 *
 * - baseline: one bare `GET` on the node-redis client.
 * - floor: RedisStore's own commands, sent bare on the node-redis client
 *   with nothing of ours around them (no hashing, no decoding, no
 *   deadline): a fresh key is the native claim `SET … NX PX ttl GET` and the
 *   complete script by `EVALSHA`, a replay the `SET … NX PX ttl GET` that
 *   answers a completed record. What RedisStore could reach if its
 *   JavaScript cost nothing. The same on ioredis, on a connection of its own.
 * - floor + hashes: the node-redis floor after the slot's and the
 *   fingerprint's SHA-256 (as every subject of `storeSubject` pays), its
 *   replies as bytes: what RedisStore could reach if its own code (claim,
 *   records, decode, deadlines) cost nothing.
 *
 * @module
 */

import { deleteRedisKeys } from "../tests/_support/redis.ts";
import { parseArgs } from "node:util";
import { createClient } from "redis";
import { Redis } from "ioredis";
import { RedisStore } from "../src/stores/redis.ts";
import { SCRIPTS } from "../src/stores/_redis_scripts.ts";
import { sha256Hex } from "../src/_sha256.ts";
import { requestFingerprint, slotOf } from "../src/fingerprint.ts";
import { Buffer } from "node:buffer";
import {
  completedRecord,
  inFlightRecord,
} from "../src/stores/_redis_record.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import type { StoredResponse } from "../src/store.ts";
import {
  interleaved,
  markdownTable,
  sequential,
  summarize,
  throughput,
} from "./_measure.ts";
import {
  CLAIM,
  clientAddress,
  jsonBody,
  nodeIdempotencySubject,
  powertoolsSubject,
  storeSubject,
  type Subject,
} from "./_peers.ts";

const { values: args } = parseArgs({
  args: Deno.args,
  options: {
    n: { type: "string", default: "5000" },
    seconds: { type: "string", default: "3" },
    only: { type: "string", default: "" },
    rounds: { type: "string", default: "10" },
    url: { type: "string", default: "redis://127.0.0.1:6379" },
  },
});
const N = Number(args.n);
const SECONDS = Number(args.seconds);
const URL_ = args.url;
const only = args.only ? args.only.split(",") : [];

const run = `bench_${Date.now().toString(36)}_${
  crypto.randomUUID().slice(0, 6)
}`;
const encoder = new TextEncoder();
const BODY = jsonBody();
const BODY_BYTES = encoder.encode(BODY);

const RESPONSE: StoredResponse = {
  status: 201,
  headers: [["content-type", "application/json"]],
  body: BODY_BYTES,
};
/** Clients more than one subject uses, closed after all of them. */
const sharedClients: (() => void)[] = [];

async function subjects(): Promise<Subject[]> {
  const list: Subject[] = [];

  const nodeRedis = await createClient({ url: URL_ }).connect();
  sharedClients.push(() => nodeRedis.destroy());
  const nodeSend = (a: string[]) => nodeRedis.sendCommand(a);
  list.push({
    name: "baseline: one GET (node-redis)",
    what: "one bare command, no idempotency",
    address: () => clientAddress(nodeSend),
    fresh: (key) => nodeRedis.get(`${run}:get:${key}`),
    prime: () => Promise.resolve(),
    replay: (key) => nodeRedis.get(`${run}:get:${key}`),
    // The last to close: the RedisStore below shares this client.
    close: () => {},
  });

  const sha = String(
    await nodeRedis.sendCommand(["SCRIPT", "LOAD", SCRIPTS.complete.source]),
  );
  const floorToken = `${"0".repeat(36)}${sha256Hex("fingerprint")}`;
  const floorRecord = completedRecord(floorToken, RESPONSE)!;
  const floorFlight = inFlightRecord(floorToken, CLAIM.leaseMs, CLAIM.ttlMs);
  const ttl = String(CLAIM.ttlMs);
  const floorClaim = (key: string, value: string) =>
    nodeRedis.sendCommand(["SET", key, value, "NX", "PX", ttl, "GET"]);
  const floorFresh = async (key: string) => {
    const k = `${run}:floor:${key}`;
    await floorClaim(k, floorFlight);
    const done = await nodeRedis.sendCommand([
      "EVALSHA",
      sha,
      "1",
      k,
      floorToken,
      floorRecord,
    ]);
    if (Number(done) !== 1) throw new Error(`floor: complete ${done}`);
  };
  list.push({
    name: "floor: RedisStore's commands, bare (node-redis)",
    what:
      "SET NX PX GET + EVALSHA complete; replay SET NX PX GET; nothing else",
    address: () => clientAddress(nodeSend),
    fresh: floorFresh,
    prime: floorFresh,
    replay: (key) => floorClaim(`${run}:floor:${key}`, floorFlight),
    close: () => {},
  });

  // The floor with what RedisStore cannot skip around its commands: the slot
  // and the fingerprint hashed as storeSubject hashes them, and replies as
  // bytes (the typeMapping RedisStore asks node-redis for).
  const BYTES = { typeMapping: { 36: Buffer } };
  const hashed = (key: string) => {
    slotOf("scope", key);
    requestFingerprint("POST", "http://app.test/pay", BODY_BYTES);
    return `${run}:hfloor:${key}`;
  };
  const set = (k: string) => ["SET", k, floorFlight, "NX", "PX", ttl, "GET"];
  const hashedFresh = async (key: string) => {
    const k = hashed(key);
    await nodeRedis.sendCommand(set(k), BYTES);
    const complete = ["EVALSHA", sha, "1", k, floorToken, floorRecord];
    const done = await nodeRedis.sendCommand(complete, BYTES);
    if (Number(done) !== 1) throw new Error(`floor: complete ${done}`);
  };
  list.push({
    name: "floor + hashes (node-redis)",
    what: "the floor's commands, byte replies, after the two hashes",
    address: () => clientAddress(nodeSend),
    fresh: hashedFresh,
    prime: hashedFresh,
    replay: (key) => nodeRedis.sendCommand(set(hashed(key)), BYTES),
    close: () => {},
  });

  list.push(storeSubject(
    "RedisStore (node-redis)",
    "fenced claim/complete, lease, status+headers+bytes",
    new RedisStore({ client: nodeRedis, prefix: `${run}:ours:` }),
    BODY,
    () => {},
    () => clientAddress(nodeSend),
  ));

  const io = new Redis(URL_);
  list.push(storeSubject(
    "RedisStore (ioredis)",
    "same, on ioredis",
    new RedisStore({ client: io, prefix: `${run}:io:` }),
    BODY,
    () => io.disconnect(),
    () => clientAddress((a) => io.call(a[0]!, ...a.slice(1))),
  ));

  // The same floor on ioredis, its own connection: what RedisStore on
  // ioredis could reach if its JavaScript cost nothing.
  const ioFloor = new Redis(URL_);
  // The byte-reply methods RedisStore sends through (see _redis_client.ts).
  const ioBuffer = ioFloor as unknown as Record<
    "setBuffer" | "evalshaBuffer",
    (...args: (string | number | Uint8Array)[]) => Promise<unknown>
  >;
  const ioFloorClaim = (key: string) =>
    ioBuffer.setBuffer(key, floorFlight, "NX", "PX", ttl, "GET");
  const ioFloorFresh = async (key: string) => {
    const k = `${run}:iofloor:${key}`;
    await ioFloorClaim(k);
    const done = await ioBuffer.evalshaBuffer(
      sha,
      1,
      k,
      floorToken,
      floorRecord,
    );
    if (Number(done) !== 1) throw new Error(`ioredis floor: complete ${done}`);
  };
  list.push({
    name: "floor: RedisStore's commands, bare (ioredis)",
    what: "the same commands on ioredis; nothing else",
    address: () =>
      clientAddress((a) => ioFloor.call(a[0]!, ...a.slice(1)) as never),
    fresh: ioFloorFresh,
    prime: ioFloorFresh,
    replay: (key) => ioFloorClaim(`${run}:iofloor:${key}`),
    close: () => ioFloor.disconnect(),
  });

  list.push(storeSubject(
    "MemoryStore",
    "same calls, one process, no Redis",
    // Bounded, as in production: an unbounded store grows the heap all run
    // long, and the garbage collector then slows every subject after it.
    new MemoryStore({ maxEntries: 10_000 }),
    BODY,
    () => {},
  ));

  list.push(await powertoolsSubject(URL_, `${run}:pt`, BODY));
  list.push(await nodeIdempotencySubject(URL_, `${run}:ni`, BODY));

  const chosen = (s: Subject) =>
    only.length === 0 || only.some((o) => s.name.includes(o));
  // Those left out are closed now: their open clients kept the process alive.
  for (const s of list) if (!chosen(s)) await s.close();
  return list.filter(chosen);
}

/** Counts the commands `address` sends while `fn` runs, with MONITOR. */
async function roundTrips(
  address: string,
  fn: () => Promise<unknown>,
): Promise<number> {
  const base = new Redis(URL_, { enableReadyCheck: false, lazyConnect: true });
  const monitor = await base.monitor();
  let count = 0;
  monitor.on("monitor", (_t: string, _a: string[], source: string) => {
    if (source === address) count++;
  });
  // MONITOR starts on its own connection: make sure it sees the next command.
  await new Promise((resolve) => setTimeout(resolve, 50));
  await fn();
  await new Promise((resolve) => setTimeout(resolve, 100));
  monitor.disconnect();
  base.disconnect();
  return count;
}

interface Row {
  name: string;
  what: string;
  freshP50: number;
  freshP99: number;
  replayP50: number;
  replayP99: number;
  freshRps: number;
  replayRps: number;
  freshTrips: number | null;
  replayTrips: number | null;
}

const ROUNDS = Number(args.rounds);
const rows: Row[] = [];
const list = await subjects();
try {
  // Subjects take turns, round after round, so that load from anything else
  // on the machine falls on all of them alike.
  const state = list.map((s) => ({
    s,
    tag: s.name.replace(/\W+/g, "_"),
    fresh: [] as number[],
    replay: [] as number[],
    freshDone: 0,
    freshTime: 0,
    replayDone: 0,
    replayTime: 0,
    replayKeys: [] as string[],
  }));
  for (const st of state) {
    st.replayKeys = Array.from({ length: 64 }, (_, i) => `${st.tag}:r:${i}`);
    for (const key of st.replayKeys) await st.s.prime(key);
    for (let i = 0; i < 300; i++) await st.s.fresh(`${st.tag}:w:${i}`); // warm-up
  }
  let serial = 0;
  let shown = -1;
  await interleaved(state, ROUNDS, async (st, round) => {
    if (round !== shown) {
      console.error(`round ${(shown = round) + 1}/${ROUNDS}`);
    }
    const { s } = st;
    const freshKey = () => `${st.tag}:f:${serial++}`;
    const replayKey = (i: number) => st.replayKeys[i % 64]!;
    st.fresh.push(
      ...await sequential(() => s.fresh(freshKey()), Math.ceil(N / ROUNDS)),
    );
    st.replay.push(
      ...await sequential((i) => s.replay(replayKey(i)), Math.ceil(N / ROUNDS)),
    );
    const f = await throughput(() => s.fresh(freshKey()), SECONDS / ROUNDS);
    st.freshDone += f.done;
    st.freshTime += f.seconds;
    const r = await throughput((i) => s.replay(replayKey(i)), SECONDS / ROUNDS);
    st.replayDone += r.done;
    st.replayTime += r.seconds;
  });
  for (const st of state) {
    const { s } = st;
    let freshTrips: number | null = null;
    let replayTrips: number | null = null;
    if (s.address) {
      const address = await s.address();
      const k = 20;
      freshTrips = await roundTrips(address, async () => {
        for (let i = 0; i < k; i++) await s.fresh(`${st.tag}:t:${i}`);
      }) / k;
      replayTrips = await roundTrips(address, async () => {
        for (let i = 0; i < k; i++) await s.replay(st.replayKeys[i % 64]!);
      }) / k;
    }
    const fresh = summarize(st.fresh);
    const replay = summarize(st.replay);
    rows.push({
      name: s.name,
      what: s.what,
      freshP50: fresh.p50,
      freshP99: fresh.p99,
      replayP50: replay.p50,
      replayP99: replay.p99,
      freshRps: st.freshDone / st.freshTime,
      replayRps: st.replayDone / st.replayTime,
      freshTrips,
      replayTrips,
    });
  }
} finally {
  // Clean up every key of this run.
  await deleteRedisKeys(run, URL_);
  for (const s of list) await s.close();
  // The shared node-redis client: left open, it kept the process alive.
  sharedClients.forEach((close) => close());
}

const us = (x: number) => x.toFixed(0);
const k = (x: number) => `${(x / 1000).toFixed(1)}k`;
console.log(
  `\nn=${N} sequential calls and ${SECONDS}s at 32 in flight per subject, in ${ROUNDS} interleaved rounds, one connection each\n`,
);
console.log(markdownTable(
  [
    "implementation",
    "fresh p50 / p99 µs",
    "replay p50 / p99 µs",
    "fresh calls/s @32",
    "replay calls/s @32",
    "round trips fresh / replay",
    "what it does",
  ],
  rows.map((r) => [
    r.name,
    `${us(r.freshP50)} / ${us(r.freshP99)}`,
    `${us(r.replayP50)} / ${us(r.replayP99)}`,
    k(r.freshRps),
    k(r.replayRps),
    r.freshTrips === null
      ? "0 / 0"
      : `${r.freshTrips.toFixed(1)} / ${r.replayTrips!.toFixed(1)}`,
    r.what,
  ]),
));
const ours = rows.find((r) => r.name === "RedisStore (node-redis)");
const peers = rows.filter((r) => /Powertools|node-idempotency/.test(r.name));
const get = rows.find((r) => r.name.startsWith("baseline"));
const floor = rows.find((r) =>
  r.name.startsWith("floor") && /node-redis/.test(r.name)
);
if (ours && get) {
  console.log(
    `\nRedisStore (node-redis) p50 against a bare GET: fresh ${
      (ours.freshP50 / get.freshP50).toFixed(2)
    }×, replay ${(ours.replayP50 / get.replayP50).toFixed(2)}×`,
  );
}
if (ours && floor) {
  console.log(
    `RedisStore (node-redis) calls/s against its commands sent bare: fresh ${
      (ours.freshRps / floor.freshRps).toFixed(2)
    }×, replay ${(ours.replayRps / floor.replayRps).toFixed(2)}×`,
  );
}
const hashedFloor = rows.find((r) => r.name.startsWith("floor + hashes"));
if (ours && hashedFloor) {
  console.log(
    `RedisStore (node-redis) calls/s against its commands and hashes: fresh ${
      (ours.freshRps / hashedFloor.freshRps).toFixed(2)
    }×, replay ${(ours.replayRps / hashedFloor.replayRps).toFixed(2)}×`,
  );
  for (const p of peers) {
    console.log(
      `  the commands and hashes against ${p.name}: fresh ${
        (hashedFloor.freshRps / p.freshRps).toFixed(2)
      }×, replay ${(hashedFloor.replayRps / p.replayRps).toFixed(2)}×`,
    );
  }
}
const oursIo = rows.find((r) => r.name === "RedisStore (ioredis)");
const floorIo = rows.find((r) =>
  r.name.startsWith("floor") && /ioredis/.test(r.name)
);
if (oursIo && floorIo) {
  console.log(
    `RedisStore (ioredis) calls/s against its commands sent bare: fresh ${
      (oursIo.freshRps / floorIo.freshRps).toFixed(2)
    }×, replay ${(oursIo.replayRps / floorIo.replayRps).toFixed(2)}×`,
  );
}
if (ours && peers.length) {
  console.log(
    "\nRatios, RedisStore (node-redis) vs each peer (higher is better for us):\n",
  );
  for (const p of peers) {
    console.log(
      `- ${p.name}: fresh p50 ${
        (p.freshP50 / ours.freshP50).toFixed(2)
      }× faster, replay p50 ${
        (p.replayP50 / ours.replayP50).toFixed(2)
      }× faster, calls/s fresh ${
        (ours.freshRps / p.freshRps).toFixed(2)
      }×, replay ${(ours.replayRps / p.replayRps).toFixed(2)}×`,
    );
  }
}
