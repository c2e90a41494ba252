// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What a SqliteStore costs per request, against its floors on the same
 * file and connection: a new key (claim + complete) against a bare
 * `INSERT` + `UPDATE` of the same row shape (and index), a replay and a claim in flight
 * against one indexed `SELECT` of the record. Each in WAL mode with
 * `synchronous=NORMAL` and `FULL`. The floors are also what `DatabaseSync`
 * blocks the event loop for: the statement's whole time is synchronous.
 * Each figure is the median of 3 rounds, each case beside its floor. With
 * `--growth`, the same at 10k, 100k and 1M rows, and a sweep of the expired
 * half of them, 1,000 rows a batch.
 *
 * ```sh
 * deno run --allow-read --allow-write --allow-env bench/sqlite_compare.ts [iterations] [--growth]
 * ```
 *
 * It works in a temporary directory, removed at the end.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { SqliteStore } from "../src/stores/sqlite.ts";
import { claimOptions, record } from "./_app.ts";
import { type Case, median, ratio, timedCase } from "./_measure.ts";

const iterations = Number(Deno.args.find((a) => /^\d+$/.test(a)) ?? 2000);
const growth = Deno.args.includes("--growth");
const warmup = Math.max(50, Math.floor(iterations / 10));
const dir = await Deno.makeTempDir({ prefix: "idem-sqlite-bench-" });

interface Subject {
  db: DatabaseSync;
  store: SqliteStore;
  floor: {
    insert(slot: string): void;
    update(slot: string): void;
    select(): void;
  };
}

function open(synchronous: "NORMAL" | "FULL", name: string): Subject {
  const db = new DatabaseSync(`${dir}/${name}.sqlite`);
  const store = new SqliteStore({ database: db });
  db.exec("PRAGMA journal_mode = WAL");
  db.exec(`PRAGMA synchronous = ${synchronous}`);
  return { db, store, floor: floors(db) };
}

/** The floors: the bare statements a store cannot do with less of, on a table of the same shape. */
function floors(db: DatabaseSync): Subject["floor"] {
  db.exec(`CREATE TABLE floor (slot TEXT PRIMARY KEY NOT NULL, version INTEGER,
    state TEXT, fingerprint TEXT, token TEXT, lease_until INTEGER,
    expires_at INTEGER, status INTEGER, headers TEXT, body BLOB,
    created_at INTEGER);
    CREATE INDEX floor_expires_at_idx ON floor (expires_at)`);
  const insert = db.prepare(
    `INSERT INTO floor (slot, version, state, fingerprint, token, lease_until,
      expires_at, created_at) VALUES (?, 1, 'in_flight', ?, ?, 1, 2, 3)`,
  );
  const update = db.prepare(
    "UPDATE floor SET state = 'completed', status = 201, headers = ?, body = ? WHERE slot = ?",
  );
  const select = db.prepare("SELECT * FROM floor WHERE slot = ?");
  // The cheapest form, as the store's own read: an array, no names.
  (select as { setReturnArrays?: (on: boolean) => void }).setReturnArrays?.(
    true,
  );
  const headers = JSON.stringify(record.headers);
  insert.run("replayed", claimOptions.fingerprint, "t");
  update.run(headers, record.body, "replayed");
  return {
    insert: (slot) => insert.run(slot, claimOptions.fingerprint, "t"),
    update: (slot) => update.run(headers, record.body, slot),
    select: () => select.get("replayed"),
  };
}

async function cases(s: Subject, label: string): Promise<Case[]> {
  const { store, floor } = s;
  await store.migrate();
  const first = await store.claim("replayed", claimOptions);
  if (first.state === "acquired") {
    await store.complete("replayed", first.token, record);
  }
  const run = `${label}:${crypto.randomUUID().slice(0, 8)}`;
  // In flight for the whole round, however slow the disk makes it.
  const long = { ...claimOptions, leaseMs: 3_600_000, ttlMs: 3_600_000 };
  await store.claim(`busy:${run}`, long);
  const options = { iterations, warmup };
  const out: Case[] = [];
  // Each floor right before its case: drift falls on both alike.
  out.push(
    await timedCase("floor: INSERT + UPDATE", (i) => {
      floor.insert(`${run}:${i}`);
      floor.update(`${run}:${i}`);
      return Promise.resolve();
    }, options),
  );
  out.push(
    await timedCase("new key: claim + complete", async (i) => {
      const slot = `${run}:${i}`;
      const claim = await store.claim(slot, claimOptions);
      if (claim.state !== "acquired") throw new Error(`not acquired: ${slot}`);
      await store.complete(slot, claim.token, record);
    }, options),
  );
  out.push(
    await timedCase("floor: indexed SELECT", () => {
      floor.select();
      return Promise.resolve();
    }, options),
  );
  out.push(
    await timedCase("replay: claim", async () => {
      const claim = await store.claim("replayed", claimOptions);
      if (claim.state !== "completed") throw new Error("not a replay");
    }, options),
  );
  out.push(
    await timedCase("in flight: claim", async () => {
      const claim = await store.claim(`busy:${run}`, claimOptions);
      if (claim.state !== "in_flight") throw new Error("not in flight");
    }, options),
  );
  return out;
}

const ROUNDS = 3;

/** The cases `ROUNDS` times over; each figure the median of its rounds. */
async function rounds(s: Subject, label: string): Promise<Case[]> {
  const all: Case[][] = [];
  for (let r = 0; r < ROUNDS; r++) all.push(await cases(s, `${label}:${r}`));
  return all[0]!.map((first, i) => ({
    ...first,
    p50: median(all.map((round) => round[i]!.p50)),
    p99: median(all.map((round) => round[i]!.p99)),
  }));
}

function table(label: string, results: Case[]): void {
  const [insertFloor, fresh, selectFloor, replay, inFlight] = results;
  const rows = results.map((r) => ({
    case: r.name,
    "p50 µs": +r.p50.toFixed(1),
    "p99 µs": +r.p99.toFixed(1),
    "p50 × floor": r === fresh
      ? ratio(r.p50, insertFloor!.p50)
      : r === replay || r === inFlight
      ? ratio(r.p50, selectFloor!.p50)
      : 1,
  }));
  // deno-lint-ignore no-console
  console.log(`\n${label}`);
  // deno-lint-ignore no-console
  console.table(rows);
}

/** `n` completed rows (half expired, for the sweep) in one transaction. */
function fill(db: DatabaseSync, table: string, n: number): void {
  const have = db.prepare(`SELECT count(*) AS n FROM ${table}`).get()!.n;
  n -= Number(have);
  db.exec("BEGIN");
  db.prepare(
    `WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < ?)
    INSERT INTO ${table} (slot, version, state, fingerprint, token, expires_at,
      status, headers, body, created_at)
    SELECT 'fill:' || ? || ':' || x, 1, 'completed', 'fp', 't',
      CASE WHEN x % 2 = 0 THEN 0 ELSE 9e12 END, 201, '[]', x'7b7d', 0 FROM i`,
  )
    .run(n, String(n + Number(have)));
  db.exec("COMMIT");
}

try {
  for (const synchronous of ["NORMAL", "FULL"] as const) {
    const s = open(synchronous, synchronous);
    table(`WAL, synchronous=${synchronous}`, await rounds(s, synchronous));
    s.store.close();
    s.db.close();
  }
  if (growth) {
    const s = open("NORMAL", "growth");
    await s.store.migrate();
    for (const n of [10_000, 100_000, 1_000_000]) {
      fill(s.db, s.store.table, n);
      table(`${n} rows, WAL, synchronous=NORMAL`, await rounds(s, `g${n}`));
      const t0 = performance.now();
      const swept = await s.store.sweep({ batchSize: 1000 });
      const ms = performance.now() - t0;
      // deno-lint-ignore no-console
      console.log(
        `sweep: ${swept} expired rows in batches of 1000, ${
          Math.round(ms)
        } ms (${(ms / (swept / 1000)).toFixed(1)} ms a batch)`,
      );
    }
    s.store.close();
    s.db.close();
  }
  // deno-lint-ignore no-console
  console.log(
    `\n${ROUNDS} rounds of ${iterations} iterations after ${warmup} warm-up, one connection, ${navigator.hardwareConcurrency} cores, SQLite ${
      new DatabaseSync(":memory:").prepare("SELECT sqlite_version() AS v").get()
        ?.v
    }`,
  );
} finally {
  await Deno.remove(dir, { recursive: true });
}
