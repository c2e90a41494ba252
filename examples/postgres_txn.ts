// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's "Exactly once with PostgreSQL" snippet as a whole server, on
 * 127.0.0.1:8000, against the database at `DATABASE_URL`: each order's row and
 * its idempotency record commit in one transaction, or neither does.
 *
 *     deno run --allow-net --allow-env examples/postgres_txn.ts
 *
 * @module
 */
import { accountOf } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { PostgresStore } from "@idempotent/http/postgres";
import postgres from "postgres";

const url = Deno.env.get("DATABASE_URL") ??
  "postgres://postgres@127.0.0.1/test";
const sql = postgres(url, { max: 10 }); // a transaction holds one connection
const store = new PostgresStore({ sql, table: "app.idempotency_keys" });
await store.migrate(); // creates the schema "app" and the records' table
await sql`CREATE TABLE IF NOT EXISTS app.payments (id bigserial PRIMARY KEY, amount int NOT NULL)`;
const pay = store.transactional(async (req, tx) => {
  const { amount } = await req.json();
  const [row] =
    await tx`INSERT INTO app.payments (amount) VALUES (${amount}) RETURNING id`;
  return Response.json({ id: Number(row!.id), amount }, { status: 201 });
});
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(pay, { store, scope: accountOf }),
);
