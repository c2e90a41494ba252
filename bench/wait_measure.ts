// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What a waiting duplicate costs (`waitForInFlight`): store reads per waiter
 * and the latency from the first request's settle (its `completed` event)
 * to the waiter's answer, for waiters in the owner's instance (parked),
 * waiters in another instance (polling with backoff), and the baseline, a
 * waiter that polls the store every 10 ms (what a fixed-interval polling
 * wait does), all in the same run on the same store. The first request's
 * handler is held for `HOLD` ms.
 *
 *     deno run -A --unstable-kv bench/wait_measure.ts [redis|redis-sub|postgres|kv|kv-poll] [HOLD_MS...]
 *
 * @module
 */
// deno-lint-ignore-file no-console
import { createClient } from "redis";
import postgres from "postgres";
import { idempotency, type IdempotencyEvent } from "../mod.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { requestFingerprint, slotOf } from "../src/fingerprint.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { KvStore } from "../src/stores/kv.ts";
import {
  DATABASE_URL,
  REDIS_URL,
  uniquePrefix,
} from "../tests/_support/services.ts";
import { deleteRedisKeys } from "../tests/_support/redis.ts";

const kind = Deno.args[0] ?? "redis";
const holds = Deno.args.slice(1).map(Number);
if (holds.length === 0) holds.push(100, 1000);
const WAITERS = 10;
const TRIALS = 5;

const cleanups: (() => Promise<unknown>)[] = [];
async function twoStores(): Promise<[IdempotencyStore, IdempotencyStore]> {
  if (kind === "redis" || kind === "redis-sub") {
    const prefix = `${uniquePrefix("waitbench")}:`;
    const clients = await Promise.all(
      [0, 1].map(() => createClient({ url: REDIS_URL }).connect()),
    );
    cleanups.push(() => deleteRedisKeys(prefix));
    const subscribers = kind === "redis-sub"
      ? await Promise.all(clients.map((c) => c.duplicate().connect()))
      : [];
    for (const c of [...subscribers, ...clients]) {
      cleanups.push(() => Promise.resolve(c.destroy()));
    }
    const [a, b] = clients;
    const [subA, subB] = subscribers;
    return [
      new RedisStore({
        client: a!,
        prefix,
        ...subA ? { subscriber: subA } : {},
      }),
      new RedisStore({
        client: b!,
        prefix,
        ...subB ? { subscriber: subB } : {},
      }),
    ];
  }
  if (kind === "kv" || kind === "kv-poll") {
    const path = await Deno.makeTempFile({ suffix: ".db" });
    const [a, b] = [await Deno.openKv(path), await Deno.openKv(path)];
    cleanups.push(async () => {
      a.close();
      b.close();
      await Deno.remove(path);
    });
    const storeB = new KvStore({ kv: b });
    // kv-poll: the same store without its waitForChange(), to compare.
    if (kind === "kv-poll") {
      Object.defineProperty(storeB, "waitForChange", { value: undefined });
    }
    return [new KvStore({ kv: a }), storeB];
  }
  const schema = uniquePrefix("waitbench");
  const pools = [0, 1].map(() =>
    postgres(DATABASE_URL, { max: 4, onnotice: () => {} })
  );
  await pools[0]!.unsafe(`CREATE SCHEMA "${schema}"`);
  cleanups.push(async () => {
    await pools[0]!.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
  });
  for (const p of pools) cleanups.push(() => p.end());
  const stores = pools.map((sql) =>
    new PostgresStore({ sql, table: `${schema}.keys` })
  );
  await stores[0]!.migrate();
  return [stores[0]!, stores[1]!];
}

const [storeA, storeB] = await twoStores();
let settledAt = 0;
let onClaimed = () => {};
const woken = new Map<string, number[]>();
const onEvent = (event: IdempotencyEvent) => {
  if (event.type === "completed") settledAt = performance.now();
  if (event.type === "claimed") onClaimed();
  if (event.type === "woken") {
    woken.set(event.via, [...woken.get(event.via) ?? [], event.reads]);
  }
};
let hold = 0;
const handler = async () => {
  await new Promise((r) => setTimeout(r, hold));
  return new Response("paid", { status: 201 });
};
const wait = { waitForInFlight: 60_000, onEvent };
const a = idempotency(handler, { scope: "global", store: storeA, ...wait });
const b = idempotency(handler, { scope: "global", store: storeB, ...wait });
const post = (key: string) =>
  new Request("http://bench/payments", {
    method: "POST",
    headers: { "idempotency-key": key },
    body: "{}",
  });

/** The baseline: claim every 10 ms until the slot is no longer in flight. */
async function poll10(slotKey: string): Promise<number> {
  const slot = slotOf("", slotKey);
  const fingerprint = await requestFingerprint(
    "POST",
    "http://bench/payments",
    new TextEncoder().encode("{}"),
  );
  let reads = 0;
  for (;;) {
    const claim = await storeB.claim(slot, {
      fingerprint,
      leaseMs: 30_000,
      ttlMs: 86_400_000,
    });
    reads++;
    if (claim.state !== "in_flight") return reads;
    await new Promise((r) => setTimeout(r, 10));
  }
}

type Mode = "owner" | "poll" | "poll10";
async function trial(mode: Mode, key: string) {
  woken.clear();
  // The duplicates arrive once the first has claimed.
  const claimed = new Promise<void>((r) => onClaimed = r);
  const first = a(post(key));
  await claimed;
  const answered: number[] = [];
  const reads: number[] = [];
  const waiters = Array.from({ length: WAITERS }, async () => {
    if (mode === "poll10") {
      reads.push(await poll10(key));
    } else {
      const res = await (mode === "owner" ? a : b)(post(key));
      await res.arrayBuffer();
    }
    answered.push(performance.now());
  });
  await (await first).arrayBuffer();
  await Promise.all(waiters);
  // Every mode counts the duplicate's first claim too.
  if (mode !== "poll10") {
    reads.push(...(woken.get(mode) ?? []).map((n) => n + 1));
  }
  return {
    latency: answered.map((t) => t - settledAt),
    reads,
  };
}

const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const p = (xs: number[], q: number) =>
  [...xs].sort((x, y) => x - y)[Math.floor(q * (xs.length - 1))]!;

try {
  for (const h of holds) {
    hold = h;
    const results: Record<Mode, { latency: number[]; reads: number[] }> = {
      owner: { latency: [], reads: [] },
      poll: { latency: [], reads: [] },
      poll10: { latency: [], reads: [] },
    };
    for (let t = 0; t < TRIALS; t++) {
      for (const mode of ["poll10", "poll", "owner"] as Mode[]) {
        const r = await trial(mode, `${mode}-${h}-${t}-${crypto.randomUUID()}`);
        results[mode].latency.push(...r.latency);
        results[mode].reads.push(...r.reads);
      }
    }
    const base = results.poll10;
    console.log(
      `\n${kind}, handler held ${h} ms, ${WAITERS} waiters x ${TRIALS}`,
    );
    console.log(
      "mode    reads/waiter  latency mean  p50   p95   (ratio to poll10: reads, mean latency)",
    );
    for (const mode of ["poll10", "poll", "owner"] as Mode[]) {
      const r = results[mode];
      console.log(
        `${mode.padEnd(7)} ${mean(r.reads).toFixed(1).padStart(6)}  ${
          mean(r.latency).toFixed(1).padStart(10)
        } ${p(r.latency, 0.5).toFixed(1).padStart(6)} ${
          p(r.latency, 0.95).toFixed(1).padStart(6)
        }   ${(mean(r.reads) / mean(base.reads)).toFixed(2)}x, ${
          (mean(r.latency) / mean(base.latency)).toFixed(2)
        }x`,
      );
    }
  }
} finally {
  for (const cleanup of cleanups) await cleanup();
}
