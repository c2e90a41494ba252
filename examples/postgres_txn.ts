// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's "Exactly once with PostgreSQL" snippet as a whole server, on
 * port 8000, against the database at `DATABASE_URL`: each order's row and
 * its idempotency record commit in one transaction, or neither does.
 *
 *     DATABASE_URL=postgres://postgres@127.0.0.1:5432/test deno run --allow-net --allow-env examples/postgres_txn.ts
 *
 * @module
 */
import { idempotency } from "@idempotent/http";
import { PostgresStore } from "@idempotent/http/postgres";
import postgres from "postgres";

const sql = postgres(Deno.env.get("DATABASE_URL")!, { max: 10 }); // a transaction holds one connection
const store = new PostgresStore({
  sql,
  table: "app.idempotency_keys",
  transaction: { isolation: "read committed", statementTimeoutMs: 10_000 }, // the defaults
});
await store.migrate();
await sql`CREATE TABLE IF NOT EXISTS app.payments (id bigserial PRIMARY KEY, amount int NOT NULL)`;

Deno.serve(idempotency(
  store.transactional(async (req, tx) => {
    const { amount } = await req.json();
    const [payment] =
      await tx`INSERT INTO app.payments (amount) VALUES (${amount}) RETURNING id`;
    return Response.json({ id: Number(payment!.id), amount }, { status: 201 }); // commits with its record
  }),
  { store },
));
