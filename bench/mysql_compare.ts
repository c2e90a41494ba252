// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What a MysqlStore costs per request on MariaDB/MySQL (`MYSQL_URL`), against
 * floors on the same pool in the same run: a bare `SELECT 1`, the indexed
 * `SELECT` of the record (a replay's floor) and the bare two statements of a
 * new key (`INSERT` of the claim, `UPDATE` with the response). Cases
 * alternate over rounds (the order reversed every other round) so that load
 * from anything else falls on all alike; each figure is the median of the
 * rounds' p50s. Prints p50/p99 in microseconds and the ratios.
 *
 * ```sh
 * deno run -A bench/mysql_compare.ts [iterations per round] [rounds] [connections] [rows]
 * ```
 *
 * With `rows`, the table first holds that many completed records (how the
 * cost grows with the index), and the run ends by timing `sweep()` of 10,000
 * expired rows among them.
 *
 * With `connections` > 1, the same number of callers run at once and the
 * figures are µs per call (wall time / calls). It works on a table of its
 * own, dropped at the end.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { MysqlStore } from "../src/stores/mysql.ts";
import type { StoredResponse } from "../src/store.ts";
import { uniquePrefix } from "../tests/_support/services.ts";
import { mysqlPool } from "../tests/_support/mariadb.ts";
import {
  interleaved,
  markdownTable,
  median,
  ratio,
  timed,
} from "./_measure.ts";

const iterations = Number(Deno.args[0] ?? 1000);
const rounds = Number(Deno.args[1] ?? 5);
const connections = Number(Deno.args[2] ?? 1);
const prefill = Number(Deno.args[3] ?? 0);
const pool = mysqlPool({ connectionLimit: Math.max(2, connections) });
const table = uniquePrefix("mybench");
const response: StoredResponse = {
  status: 201,
  headers: [["content-type", "application/json"], ["set-cookie", "a=1"]],
  body: new TextEncoder().encode(
    JSON.stringify({ id: 1, note: "x".repeat(200) }),
  ),
};
const options = {
  fingerprint: "f".repeat(64),
  leaseMs: 30_000,
  ttlMs: 86_400_000,
};

const store = new MysqlStore({ pool, table });
await store.migrate();
const t = store.table;
const run = crypto.randomUUID().slice(0, 8);
let n = 0;
const first = await store.claim("replayed", options);
if (first.state !== "acquired") throw new Error("setup failed");
await store.complete("replayed", first.token, response);
await store.claim("live", options);
const body = Buffer.from(response.body!);
const headers = JSON.stringify(response.headers);

/** `count` rows from `from` on, completed, expiring in a day (or `expired`). */
async function fill(from: number, count: number, expired = false) {
  const until = expired ? "- INTERVAL 1 SECOND" : "+ INTERVAL 1 DAY";
  for (let at = 0; at < count; at += 5000) {
    const n = Math.min(5000, count - at);
    const values = Array.from(
      { length: n },
      (_, i) =>
        `(CONCAT('fill:', ${
          from + at + i
        }), 1, 'completed', ?, 'token', 201, ?, ?,
        UTC_TIMESTAMP(6) ${until}, UTC_TIMESTAMP(6))`,
    ).join(",");
    const params = Array.from(
      { length: n },
      () => [options.fingerprint, headers, body],
    ).flat();
    await pool.query(
      `INSERT INTO ${t} (slot, version, state, fingerprint, token, status,
        headers, body, expires_at, created_at) VALUES ${values}`,
      params,
    );
  }
}
if (prefill > 0) await fill(0, prefill);

const cases: Record<string, () => Promise<unknown>> = {
  "baseline: SELECT 1": () => pool.query("SELECT 1"),
  "replay floor: SELECT of the record": () =>
    pool.execute(`SELECT * FROM ${t} WHERE slot = ?`, ["replayed"]),
  "replay: claim": async () => {
    if ((await store.claim("replayed", options)).state !== "completed") {
      throw new Error("not a replay");
    }
  },
  "in flight: claim": () =>
    store.claim("live", { ...options, fingerprint: "o" }),
  "new key floor: INSERT + UPDATE": async () => {
    const slot = `floor:${run}:${n++}`;
    await pool.execute(
      `INSERT INTO ${t} (slot, version, state, fingerprint, token, lease_until,
        expires_at, created_at) VALUES (?, 1, 'in_flight', ?, ?,
        UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, UTC_TIMESTAMP(6) + INTERVAL 1 DAY,
        UTC_TIMESTAMP(6))`,
      [slot, options.fingerprint, "token"],
    );
    await pool.execute(
      `UPDATE ${t} SET state = 'completed', status = ?, headers = ?, body = ?,
        lease_until = NULL WHERE slot = ? AND token = ?`,
      [201, headers, body, slot, "token"],
    );
  },
  "new key: claim + complete": async () => {
    const slot = `store:${run}:${n++}`;
    const claim = await store.claim(slot, options);
    if (claim.state !== "acquired") throw new Error(`not acquired: ${slot}`);
    await store.complete(slot, claim.token, response);
  },
};

async function measure(fn: () => Promise<unknown>): Promise<number[]> {
  if (connections === 1) {
    const { p50, p99 } = await timed(fn, { iterations, warmup: 50 });
    return [p50, p99];
  }
  let left = iterations;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: connections }, async () => {
    while (left-- > 0) await fn();
  }));
  const per = ((performance.now() - t0) * 1000) / iterations;
  return [per, per];
}

const seen = new Map<string, number[][]>();
try {
  await interleaved(Object.keys(cases), rounds, async (name) => {
    const figures = await measure(cases[name]!);
    seen.set(name, [...seen.get(name) ?? [], figures]);
  });
  const p50 = (name: string) => median(seen.get(name)!.map(([p]) => p!));
  const p99 = (name: string) => median(seen.get(name)!.map(([, p]) => p!));
  const floorOf: Record<string, string> = {
    "replay: claim": "replay floor: SELECT of the record",
    "in flight: claim": "replay floor: SELECT of the record",
    "new key: claim + complete": "new key floor: INSERT + UPDATE",
  };
  const [version] = (await pool.query("SELECT VERSION() AS v"))[0] as {
    v: string;
  }[];
  const rows = Object.keys(cases).map((name) => [
    name,
    Math.round(p50(name)),
    Math.round(p99(name)),
    ratio(p50(name), p50("baseline: SELECT 1")),
    floorOf[name] ? ratio(p50(name), p50(floorOf[name]!)) : "",
  ]);
  const label = connections === 1 ? "p50 µs" : "µs/call";
  // deno-lint-ignore no-console
  console.log(markdownTable(
    ["case", label, "p99 µs", "× SELECT 1", "× its floor"],
    rows,
  ));
  let swept = "";
  if (prefill > 0) {
    await fill(prefill, 10_000, true);
    const t0 = performance.now();
    const deleted = await store.sweep();
    swept = `; sweep() of ${deleted} expired rows among them: ${
      Math.round(performance.now() - t0)
    } ms`;
  }
  // deno-lint-ignore no-console
  console.log(
    `\n${rounds} rounds × ${iterations} calls, ${connections} in flight, ${navigator.hardwareConcurrency} cores, ${version?.v}, ${prefill} rows before${swept}`,
  );
} finally {
  await pool.query(`DROP PROCEDURE IF EXISTS \`${table}_claim_v1\``);
  await pool.query(`DROP TABLE IF EXISTS \`${table}\``);
  await pool.end();
}
