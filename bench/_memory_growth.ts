// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One row of the MemoryStore part of `growth.ts`, in a process of its own so
 * that one size's heap never weighs on the next: fills a MemoryStore with
 * `records` completed records (small JSON bodies, each record its own slot
 * and fingerprint, as the middleware makes them), reads the heap used after
 * GC, then measures replays of those records and new keys (each evicting
 * the oldest: the store is full) at 32 in flight, in interleaved rounds.
 * Prints one JSON line.
 *
 *     deno run --v8-flags=--expose-gc,--single-threaded-gc bench/_memory_growth.ts RECORDS SECONDS ROUNDS
 *
 * `held` is the growth of `heapUsed + external` over a baseline taken before
 * the fill, once the code paths have run (as `tests/_support/memory_bound.ts`
 * reads it).
 *
 * @module
 */
import { MemoryStore } from "../src/stores/memory.ts";
import { sha256Hex } from "../src/_sha256.ts";
import { interleaved, median, throughput } from "./_measure.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");

const records = Number(Deno.args[0] ?? 10_000);
const seconds = Number(Deno.args[1] ?? 0.3);
const rounds = Number(Deno.args[2] ?? 3);

function used(): number {
  for (let i = 0; i < 3; i++) gc!();
  const { heapUsed, external } = Deno.memoryUsage();
  return heapUsed + external;
}

// The lease and time to live of `_peers.ts`'s CLAIM; not imported, so that
// this process loads no peer.
const CLAIM = { leaseMs: 30_000, ttlMs: 3_600_000 };
const encoder = new TextEncoder();
const slot = (i: number) => sha256Hex("slot\n", `${i}`);
const fingerprint = (i: number) => sha256Hex("fingerprint\n", `${i}`);

/** One request of key number `i`: a replay once it is stored, else new. */
async function request(store: MemoryStore, i: number): Promise<void> {
  const s = slot(i);
  const claim = await store.claim(s, { fingerprint: fingerprint(i), ...CLAIM });
  if (claim.state === "acquired") {
    const done = await store.complete(s, claim.token, {
      status: 201,
      headers: [["content-type", "application/json"]],
      body: encoder.encode(`{"id":${i},"ok":true}`),
    });
    if (done !== "applied") throw new Error(`complete: ${done}`);
  } else if (claim.state !== "completed") {
    throw new Error(`claim: ${claim.state}`);
  }
}

const make = () =>
  new MemoryStore({
    maxEntries: records,
    maxBytes: Number.MAX_SAFE_INTEGER,
  });

const warm = make();
for (let i = 0; i < 2_000; i++) await request(warm, i % 1_000);
const before = used();
const store = make();
for (let i = 0; i < records; i++) await request(store, i);
const held = used() - before;
if (store.size !== records) throw new Error(`size ${store.size}`);

let next = records;
const rates: Record<"replay" | "fresh", number[]> = { replay: [], fresh: [] };
await interleaved(["replay", "fresh"] as const, rounds, async (kind) => {
  const call = kind === "replay"
    // The newer half of the records: new keys evict the oldest.
    ? (i: number) => request(store, next - 1 - (i % (records >> 1)))
    : () => request(store, next++);
  const { done, seconds: took } = await throughput(call, seconds);
  rates[kind].push(done / took);
});

Deno.stdout.writeSync(encoder.encode(
  JSON.stringify({
    records,
    held,
    replay: median(rates.replay),
    fresh: median(rates.fresh),
  }) + "\n",
));
