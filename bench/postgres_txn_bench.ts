// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The transactional path against the plain one, in `deno bench`, on the
 * database at `DATABASE_URL`, in a schema of its own: one guarded request
 * with a new key whose handler INSERTs one row, through `sql` (the plain
 * path: claim, the INSERT, complete) as the baseline, and through the
 * request's transaction (claim, BEGIN, the INSERT, the record's write,
 * COMMIT). A replay is the same on both paths (one claim statement).
 *
 *     deno task bench bench/postgres_txn_bench.ts
 *
 * @module
 */
import postgres from "postgres";
import { idempotency } from "../mod.ts";
import { PostgresStore } from "../src/stores/postgres.ts";

const sql = postgres(
  Deno.env.get("DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test",
  { max: 4, onnotice: () => {} },
);
const schema = `bench_txn_${crypto.randomUUID().slice(0, 8)}`;
await sql.unsafe(`CREATE SCHEMA "${schema}"`);
const effects = `"${schema}".effects`;
await sql.unsafe(`CREATE TABLE ${effects} (key text NOT NULL)`);
const store = new PostgresStore({ sql, table: `${schema}.keys` });
await store.migrate();

const insert = `INSERT INTO ${effects} (key) VALUES ($1)`;
const plain = idempotency(async (request) => {
  await sql.unsafe(insert, [request.headers.get("idempotency-key")]);
  return new Response("ok", { status: 201 });
}, { scope: "global", store });
const transactional = idempotency(
  store.transactional(async (request, tx) => {
    await tx.unsafe(insert, [request.headers.get("idempotency-key")]);
    return new Response("ok", { status: 201 });
  }),
  { scope: "global", store },
);

let n = 0;
function post(): Request {
  return new Request("http://localhost/orders", {
    method: "POST",
    headers: { "idempotency-key": `k${n++}` },
  });
}

Deno.bench(
  { name: "plain: INSERT through sql", group: "new key", baseline: true },
  async () => {
    await (await plain(post())).arrayBuffer();
  },
);
Deno.bench(
  { name: "transactional: INSERT through tx", group: "new key" },
  async () => {
    await (await transactional(post())).arrayBuffer();
  },
);

globalThis.addEventListener("unload", () => {
  // The schema is the bench's own: drop it on the way out, best effort.
  void sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`).finally(() => sql.end());
});
