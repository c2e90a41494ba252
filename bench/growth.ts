// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * How cost grows with load and size, side by side with the peers where they
 * have the case, every figure a median of interleaved rounds in one run:
 *
 * 1. `inflight`: RedisStore (node-redis) and the two peers, calls/s at 1, 32
 *    and 256 in flight, replay and new key.
 * 2. `bodies`: replay and new key with 1 KiB, 64 KiB and 1 MiB bodies, at 32
 *    in flight: RedisStore, MemoryStore and the peers.
 * 3. `memory`: MemoryStore holding 10k, 100k and 1M records, calls/s and the
 *    heap used after GC, each size in a process of its own
 *    (`_memory_growth.ts`).
 * 4. `postgres`: PostgresStore's new key (claim + complete) and replay
 *    against two `SELECT 1` round trips and against two commits (an `INSERT`
 *    and an `UPDATE` of one row, each its own transaction: its floor), one
 *    connection, sequential calls.
 *
 * Parts 1 and 2 run on a redis-server of their own on a free port (emptied
 * between body cases), part 4 on the shared PostgreSQL (`DATABASE_URL`).
 * What one request is for each subject: see `_peers.ts`.
 *
 * ```sh
 * deno task bench:growth [--seconds=0.4] [--rounds=3] [--n=150] [--parts=inflight,bodies,memory,postgres] [--records=10000,100000,1000000]
 * ```
 *
 * `--seconds` is one case's time in one round, `--n` the sequential
 * PostgreSQL calls of one case in one round.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createClient } from "redis";
import postgres from "postgres";
import { RedisStore } from "../src/stores/redis.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import {
  DATABASE_URL,
  startRedisServer,
  uniquePrefix,
} from "../tests/_support/services.ts";
import {
  interleaved,
  markdownTable,
  median,
  ratio,
  sequential,
  summarize,
  throughput,
} from "./_measure.ts";
import {
  jsonBody,
  nodeIdempotencySubject,
  powertoolsSubject,
  storeSubject,
  type Subject,
} from "./_peers.ts";

const { values: args } = parseArgs({
  args: Deno.args,
  options: {
    seconds: { type: "string", default: "0.4" },
    rounds: { type: "string", default: "3" },
    n: { type: "string", default: "150" },
    parts: { type: "string", default: "inflight,bodies,memory,postgres" },
    records: { type: "string", default: "10000,100000,1000000" },
  },
});
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);
const N = Number(args.n);
const parts = new Set(args.parts.split(","));
const run = uniquePrefix("growth");

type Kind = "replay" | "fresh";
const KINDS: Kind[] = ["replay", "fresh"];
const k = (x: number) => x >= 1e4 ? `${(x / 1000).toFixed(1)}k` : x.toFixed(0);
const OURS = "RedisStore (node-redis)";
const PEERS = ["node-idempotency", "Powertools"];
const short = (name: string) =>
  name === OURS ? "RedisStore" : name.split(" ")[0]!;

/** Our RedisStore and the two peers for `body`, keys under `tag`. */
async function redisSubjects(
  url: string,
  client: ReturnType<typeof createClient>,
  tag: string,
  body: string,
): Promise<Subject[]> {
  return [
    storeSubject(
      OURS,
      "fenced claim/complete, lease, status+headers+bytes",
      new RedisStore({ client, prefix: `${run}:${tag}:ours:` }),
      body,
      () => {},
    ),
    await nodeIdempotencySubject(url, `${run}:${tag}:ni`, body),
    await powertoolsSubject(url, `${run}:${tag}:pt`, body),
  ];
}

/** Calls/s of `kind` on `s` at `inFlight`, its keys numbered from `serial`. */
let serial = 0;
async function rate(
  s: Subject,
  kind: Kind,
  inFlight: number,
  replayKeys: number,
): Promise<number> {
  const call = kind === "fresh"
    ? () => s.fresh(`f:${serial++}`)
    : (i: number) => s.replay(`r:${i % replayKeys}`);
  const { done, seconds } = await throughput(call, SECONDS, inFlight);
  return done / seconds;
}

async function prime(s: Subject, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await s.prime(`r:${i}`);
}

/** Untimed calls first, so that no subject is timed before its code is hot. */
async function warm(s: Subject, calls: number): Promise<void> {
  for (let i = 0; i < calls; i++) {
    await s.fresh(`w:${serial++}`);
    await s.replay(`r:${i % 16}`);
  }
}

/** Medians of interleaved rounds per cell, keyed by row then subject. */
type Grid = Map<string, Map<string, number[]>>;
function record(grid: Grid, row: string, subject: string, value: number) {
  const cells = grid.get(row) ?? new Map<string, number[]>();
  grid.set(row, cells);
  const list = cells.get(subject) ?? [];
  cells.set(subject, list);
  list.push(value);
}

/** A table of calls/s: our subjects, each peer, and ours against the best peer. */
function printGrid(
  grid: Grid,
  firstColumn: string,
  ours: string[],
  growthOf: (row: string) => string | undefined,
) {
  const subjects = [...ours, ...PEERS];
  const rows = [...grid].map(([row, cells]) => {
    const m = (name: string) => {
      const key = [...cells.keys()].find((c) => c.startsWith(name));
      return key === undefined ? undefined : median(cells.get(key)!);
    };
    const base = growthOf(row);
    const baseCells = base === undefined ? undefined : grid.get(base);
    const mine = m(OURS) ?? m(ours[0]!)!;
    const bestPeer = Math.max(...PEERS.map((p) => m(p) ?? 0));
    const baseMine = baseCells &&
      median(baseCells.get(OURS) ?? baseCells.get(ours[0]!)!);
    return [
      row,
      ...subjects.map((name) => {
        const v = m(name);
        return v === undefined ? "–" : k(v);
      }),
      bestPeer > 0 ? `${ratio(mine, bestPeer)}×` : "–",
      baseMine ? `${ratio(mine, baseMine)}×` : "–",
    ];
  });
  console.log(markdownTable(
    [
      firstColumn,
      ...subjects.map(short),
      `${short(ours[0]!)} / best peer`,
      `${short(ours[0]!)} / first row`,
    ],
    rows,
  ));
}

async function inflightPart(
  url: string,
  client: ReturnType<typeof createClient>,
) {
  const list = await redisSubjects(url, client, "load", jsonBody());
  try {
    for (const s of list) await prime(s, 64);
    for (const s of list) await warm(s, 300);
    const cases = list.flatMap((s) =>
      [1, 32, 256].flatMap((n) => KINDS.map((kind) => ({ s, n, kind })))
    );
    const grid: Grid = new Map();
    await interleaved(cases, ROUNDS, async ({ s, n, kind }) => {
      record(grid, `${kind} @${n}`, s.name, await rate(s, kind, n, 64));
    });
    console.log(
      `\n### Calls/s by calls in flight (${jsonBody().length}-byte body)\n`,
    );
    const sorted: Grid = new Map(
      KINDS.flatMap((kind) =>
        [1, 32, 256].map((n) => [`${kind} @${n}`, grid.get(`${kind} @${n}`)!])
      ),
    );
    printGrid(sorted, "case", [OURS], (row) => row.replace(/@\d+/, "@1"));
  } finally {
    for (const s of list) await s.close();
  }
}

const SIZES = [["1 KiB", 1024], ["64 KiB", 65_536], [
  "1 MiB",
  1_048_576,
]] as const;

async function bodiesPart(
  url: string,
  client: ReturnType<typeof createClient>,
  flush: () => Promise<unknown>,
) {
  const subjects: { size: string; s: Subject }[] = [];
  try {
    for (const [size, bytes] of SIZES) {
      const body = jsonBody(bytes);
      const tag = size.replace(" ", "");
      for (const s of await redisSubjects(url, client, tag, body)) {
        subjects.push({ size, s });
      }
      subjects.push({
        size,
        s: storeSubject(
          "MemoryStore",
          "same calls, one process",
          new MemoryStore({ maxBytes: 256 * 1_048_576 }),
          body,
          () => {},
        ),
      });
    }
    const cases = subjects.flatMap((c) =>
      KINDS.map((kind) => ({ ...c, kind }))
    );
    const grid: Grid = new Map();
    await interleaved(cases, ROUNDS, async ({ size, s, kind }) => {
      // Every case alone in Redis: new keys of 1 MiB would fill it.
      await flush();
      if (kind === "replay") await prime(s, 16);
      record(grid, `${kind}, ${size}`, s.name, await rate(s, kind, 32, 16));
    });
    await flush();
    console.log("\n### Calls/s by body size (32 in flight)\n");
    const sorted: Grid = new Map(
      KINDS.flatMap((kind) =>
        SIZES.map((
          [size],
        ) => [`${kind}, ${size}`, grid.get(`${kind}, ${size}`)!])
      ),
    );
    printGrid(
      sorted,
      "case",
      [OURS, "MemoryStore"],
      (row) => row.replace(/, .*/, ", 1 KiB"),
    );
  } finally {
    for (const { s } of subjects) await s.close();
  }
}

async function memoryPart() {
  const sizes = args.records.split(",").map(Number);
  const rows: (string | number)[][] = [];
  let first: { replay: number; fresh: number } | undefined;
  for (const records of sizes) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--v8-flags=--expose-gc,--single-threaded-gc",
        new URL("./_memory_growth.ts", import.meta.url).pathname,
        String(records),
        String(SECONDS),
        String(ROUNDS),
      ],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    if (!out.success) throw new Error(`_memory_growth.ts ${records} failed`);
    const r = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      records: number;
      held: number;
      replay: number;
      fresh: number;
    };
    first ??= r;
    rows.push([
      r.records.toLocaleString("en"),
      `${(r.held / 1_048_576).toFixed(1)} MiB`,
      Math.round(r.held / r.records),
      k(r.replay),
      `${ratio(r.replay, first.replay)}×`,
      k(r.fresh),
      `${ratio(r.fresh, first.fresh)}×`,
    ]);
  }
  console.log(
    "\n### MemoryStore by records held (full store: each new key evicts one; 32 in flight)\n",
  );
  console.log(markdownTable(
    [
      "records",
      "heap after GC",
      "bytes / record",
      "replay calls/s",
      "/ first row",
      "new key calls/s",
      "/ first row",
    ],
    rows,
  ));
}

async function postgresPart() {
  const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  const schema = uniquePrefix("pggrowth");
  try {
    await sql.unsafe(`CREATE SCHEMA "${schema}"`);
    const store = new PostgresStore({ sql, table: `${schema}.keys` });
    await store.migrate();
    const floor = `"${schema}".floor`;
    await sql.unsafe(`CREATE TABLE ${floor} (slot text PRIMARY KEY, v text)`);
    const subject = storeSubject(
      "PostgresStore",
      "",
      store,
      jsonBody(),
      () => {},
    );
    await prime(subject, 16);
    let i = 0;
    const cases: [string, () => Promise<unknown>][] = [
      ["two `SELECT 1` round trips", async () => {
        await sql`SELECT 1`;
        await sql`SELECT 1`;
      }],
      ["two commits (INSERT, then UPDATE)", async () => {
        const slot = `s${i++}`;
        await sql.unsafe(`INSERT INTO ${floor} VALUES ($1, 'a')`, [slot], {
          prepare: true,
        });
        await sql.unsafe(`UPDATE ${floor} SET v = 'b' WHERE slot = $1`, [
          slot,
        ], { prepare: true });
      }],
      ["PostgresStore new key", () => subject.fresh(`f:${i++}`)],
      ["one `SELECT 1`", () => sql`SELECT 1`],
      ["PostgresStore replay", () => subject.replay(`r:${i++ % 16}`)],
    ];
    for (const [, fn] of cases) for (let w = 0; w < 30; w++) await fn();
    const times = new Map<string, number[]>();
    await interleaved(cases, ROUNDS, async ([name, fn]) => {
      const list = times.get(name) ?? [];
      times.set(name, list);
      list.push(...await sequential(fn, N));
    });
    const p50 = (name: string) => summarize(times.get(name)!).p50;
    const selects = p50(cases[0]![0]);
    const commits = p50(cases[1]![0]);
    const [settings] = await sql`SELECT current_setting('fsync') AS fsync,
      current_setting('synchronous_commit') AS sc`;
    console.log(
      `\n### PostgresStore against its floor (one connection, sequential; fsync=${settings?.fsync}, synchronous_commit=${settings?.sc})\n`,
    );
    console.log(markdownTable(
      ["case", "p50 µs", "× two SELECT 1", "× two commits"],
      cases.map(([name]) => [
        name,
        Math.round(p50(name)),
        `${ratio(p50(name), selects)}×`,
        `${ratio(p50(name), commits)}×`,
      ]),
    ));
  } finally {
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  }
}

console.log(
  `${ROUNDS} interleaved rounds of ${SECONDS}s per case (PostgreSQL: ${N} sequential calls), ${navigator.hardwareConcurrency} cores`,
);
if (parts.has("inflight") || parts.has("bodies")) {
  const redis = await startRedisServer();
  const client = await createClient({ url: redis.url }).connect();
  try {
    if (parts.has("inflight")) await inflightPart(redis.url, client);
    if (parts.has("bodies")) {
      await bodiesPart(redis.url, client, () => client.flushAll());
    }
  } finally {
    client.destroy();
    await redis.stop();
  }
}
if (parts.has("memory")) await memoryPart();
if (parts.has("postgres")) await postgresPart();
