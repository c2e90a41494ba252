// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * Where a RedisStore replay's time goes at 32 in flight, one step at a time
 * from the bare command up, each step's calls/s against the first (median of
 * 6 interleaved rounds of 1 s): the native claim's `SET … NX PX ttl GET`
 * answered as text, then as bytes (what the store asks node-redis for), then
 * decoded, then with the middleware's two SHA-256 hashes; RedisStore's own
 * `claim()`, without and with those hashes. Not part of the table in
 * bench/README.md: the breakdown behind its "where a replay's time goes".
 *
 *     deno run -A bench/_redis_ladder.ts [url]
 *
 * @module
 */
import { createClient } from "redis";
import { Buffer } from "node:buffer";
import { sha256Hex } from "../src/_sha256.ts";
import { RedisStore } from "../src/stores/redis.ts";
import {
  decodeCompleted,
  inFlightRecord,
  newToken,
} from "../src/stores/_redis_record.ts";
import { median, throughput } from "./_measure.ts";
const url = Deno.args[0] ?? "redis://127.0.0.1:6379";
const client = await createClient({ url }).connect();
const prefix = `ladder_${Date.now().toString(36)}:`;
const store = new RedisStore({ client, prefix });
const BODY = '{"id":"pay_123","amount":1000,"currency":"eur"}';
const RESPONSE = {
  status: 201,
  headers: [["content-type", "application/json"]] as [string, string][],
  body: new TextEncoder().encode(BODY),
};
const FP = sha256Hex(`POST /pay\n${BODY}`);
const opts = { fingerprint: FP, leaseMs: 30_000, ttlMs: 3_600_000 };
const slots = Array.from({ length: 64 }, (_, i) => sha256Hex(`scope\nr:${i}`));
for (const s of slots) {
  const c = await store.claim(s, opts);
  if (c.state === "acquired") await store.complete(s, c.token, RESPONSE);
}
const rec = inFlightRecord(newToken(FP), 30_000, 3_600_000);
const TM = { typeMapping: { 36: Buffer } };
const set = (i: number, tm?: object) =>
  client.sendCommand([
    "SET",
    prefix + slots[i % 64],
    rec,
    "NX",
    "PX",
    "3600000",
    "GET",
  ], tm);
const cases: Record<string, (i: number) => Promise<unknown>> = {
  "a SET string": (i) => set(i),
  "b SET Buffer": (i) => set(i, TM),
  "c +decode": (i) =>
    set(i, TM).then((r) => decodeCompleted(r as unknown as Uint8Array)),
  "d +2 hashes": (i) => {
    sha256Hex(`scope\nr:${i % 64}`);
    sha256Hex(`POST /pay\n${BODY}`);
    return set(i, TM).then((r) => decodeCompleted(r as unknown as Uint8Array));
  },
  "e store.claim": (i) => store.claim(slots[i % 64]!, opts),
  "f +2 hashes": (i) =>
    store.claim(sha256Hex(`scope\nr:${i % 64}`), {
      ...opts,
      fingerprint: sha256Hex(`POST /pay\n${BODY}`),
    }),
};
const res: Record<string, number[]> = {};
for (let r = 0; r < 6; r++) {
  for (const [n, f] of Object.entries(cases)) {
    const t = await throughput(f, 1);
    (res[n] ??= []).push(t.done / t.seconds);
  }
}
const a = median(res["a SET string"]!);
for (const [n, l] of Object.entries(res)) {
  console.log(n, Math.round(median(l)), (median(l) / a).toFixed(2));
}
for await (const keys of client.scanIterator({ MATCH: `${prefix}*` })) {
  if (keys.length > 0) await client.del(keys);
}
client.destroy();
