// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * PostgresStore against the MemoryStore as baseline, in `deno bench`: a new
 * key (claim + complete, two statements) and a replay (claim, one
 * statement), on the database at `DATABASE_URL`, in a schema of its own.
 * `bench/postgres_compare.ts` adds p50/p99 against a bare `SELECT 1`.
 *
 *     deno task bench bench/postgres_bench.ts
 *
 * @module
 */
import postgres from "postgres";
import { MemoryStore, type StoredResponse } from "../mod.ts";
import type { IdempotencyStore } from "../src/store.ts";
import { PostgresStore } from "../src/stores/postgres.ts";

const sql = postgres(
  Deno.env.get("DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test",
  {
    max: 1,
    onnotice: () => {},
  },
);
const schema = `bench_${crypto.randomUUID().slice(0, 8)}`;
await sql.unsafe(`CREATE SCHEMA "${schema}"`);
const pg = new PostgresStore({ sql, table: `${schema}.keys` });
await pg.migrate();
const options = { fingerprint: "f".repeat(64), leaseMs: 30_000, ttlMs: 60_000 };
const record: StoredResponse = {
  status: 201,
  headers: [["content-type", "application/json"]],
  body: new TextEncoder().encode('{"id":"pay_1","status":"succeeded"}'),
};

async function fresh(store: IdempotencyStore, slot: string) {
  const claim = await store.claim(slot, options);
  if (claim.state === "acquired") {
    await store.complete(slot, claim.token, record);
  }
}

const memory = new MemoryStore();
for (const store of [memory, pg]) await fresh(store, "replayed");
let n = 0;

Deno.bench(
  { name: "MemoryStore: new key", group: "new key", baseline: true },
  async () => {
    await fresh(memory, `k${n++}`);
  },
);
Deno.bench(
  { name: "PostgresStore: new key", group: "new key" },
  async () => {
    await fresh(pg, `k${n++}`);
  },
);
Deno.bench(
  { name: "MemoryStore: replay", group: "replay", baseline: true },
  async () => {
    await memory.claim("replayed", options);
  },
);
Deno.bench({ name: "PostgresStore: replay", group: "replay" }, async () => {
  await pg.claim("replayed", options);
});

globalThis.addEventListener("unload", () => {
  // The schema is the bench's own: drop it on the way out, best effort.
  void sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`).finally(() => sql.end());
});
