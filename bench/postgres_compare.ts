// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What a PostgresStore costs per request, against one bare `SELECT 1` on the
 * same connection: a fresh key (claim + complete, two statements) and a
 * replay (one claim). Prints p50/p99 in microseconds, the ratios, and the
 * statements per request counted by the driver.
 *
 * ```sh
 * deno run --allow-net --allow-env --allow-read bench/postgres_compare.ts [iterations]
 * ```
 *
 * It works in a schema of its own, dropped at the end.
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../src/stores/postgres.ts";
import type { StoredResponse } from "../src/store.ts";
import { DATABASE_URL, uniquePrefix } from "../tests/_support/services.ts";
import { type Case, ratio, timedCase } from "./_measure.ts";

const iterations = Number(Deno.args[0] ?? 2000);
const warmup = Math.max(50, Math.floor(iterations / 10));

let statements = 0;
const sql = postgres(DATABASE_URL, {
  max: 1,
  onnotice: () => {},
  debug: () => statements++,
});
const schema = uniquePrefix("pgbench");
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

function measure(
  name: string,
  op: (i: number) => Promise<unknown>,
): Promise<Case> {
  const counters = { statements: () => statements };
  return timedCase(name, op, { iterations, warmup, counters });
}

try {
  await sql.unsafe(`CREATE SCHEMA "${schema}"`);
  const store = new PostgresStore({ sql, table: `${schema}.keys` });
  await store.migrate();
  const run = crypto.randomUUID().slice(0, 8);

  // The replayed record.
  const first = await store.claim("replayed", options);
  if (first.state !== "acquired") throw new Error("setup failed");
  await store.complete("replayed", first.token, response);

  const results: Case[] = [];
  results.push(await measure("baseline: SELECT 1", () => sql`SELECT 1`));
  results.push(
    await measure("fresh key: claim + complete", async (i) => {
      const slot = `${run}:${i}`;
      const claim = await store.claim(slot, options);
      if (claim.state !== "acquired") throw new Error(`not acquired: ${slot}`);
      await store.complete(slot, claim.token, response);
    }),
  );
  results.push(
    await measure("replay: claim", async () => {
      const claim = await store.claim("replayed", options);
      if (claim.state !== "completed") throw new Error("not a replay");
    }),
  );
  const table = store.table;
  results.push(
    await measure("read-only SELECT of the record (floor)", async () => {
      await sql.unsafe(`SELECT * FROM ${table} WHERE slot = $1`, ["replayed"], {
        prepare: true,
      });
    }),
  );
  results.push(
    await measure("in flight: claim", async () => {
      await store.claim(`${run}:0`, { ...options, fingerprint: "other" })
        .then(() => {});
    }),
  );

  const [settings] = await sql`SELECT current_setting('fsync') AS fsync,
    current_setting('synchronous_commit') AS synchronous_commit`;
  const base = results[0]!;
  const rows = results.map((r) => ({
    case: r.name,
    "p50 µs": Math.round(r.p50),
    "p99 µs": Math.round(r.p99),
    "mean µs": Math.round(r.mean),
    "p50 × baseline": ratio(r.p50, base.p50),
    "statements/request": r.per.statements,
  }));
  // deno-lint-ignore no-console
  console.table(rows);
  // deno-lint-ignore no-console
  console.log(
    `${iterations} iterations after ${warmup} warm-up, one connection, ${navigator.hardwareConcurrency} cores, fsync=${settings?.fsync}, synchronous_commit=${settings?.synchronous_commit}`,
  );
} finally {
  await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await sql.end();
}
