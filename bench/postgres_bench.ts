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
import { MemoryStore } from "../mod.ts";
import { claimOptions, freshKey } from "./_app.ts";
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
const memory = new MemoryStore();
for (const store of [memory, pg]) await freshKey(store, "replayed");
let n = 0;

Deno.bench(
  { name: "MemoryStore: new key", group: "new key", baseline: true },
  async () => {
    await freshKey(memory, `k${n++}`);
  },
);
Deno.bench(
  { name: "PostgresStore: new key", group: "new key" },
  async () => {
    await freshKey(pg, `k${n++}`);
  },
);
Deno.bench(
  { name: "MemoryStore: replay", group: "replay", baseline: true },
  async () => {
    await memory.claim("replayed", claimOptions);
  },
);
Deno.bench({ name: "PostgresStore: replay", group: "replay" }, async () => {
  await pg.claim("replayed", claimOptions);
});

globalThis.addEventListener("unload", () => {
  // The schema is the bench's own: drop it on the way out, best effort.
  void sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`).finally(() => sql.end());
});
