// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's SqliteStore snippet as a whole server, on 127.0.0.1:8000, with
 * its records in the SQLite file the app already keeps (`SQLITE_PATH`, by
 * default `app.sqlite` in the working directory): each payment's row and its
 * idempotency record commit in one `BEGIN IMMEDIATE` transaction, or neither
 * does. Processes that share the file share the store.
 *
 *     deno run --allow-net --allow-env --allow-read --allow-write examples/sqlite.ts
 *
 * @module
 */
import { accountOf } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { SqliteStore } from "@idempotent/http/sqlite";
import { DatabaseSync } from "node:sqlite";

const db = new DatabaseSync(Deno.env.get("SQLITE_PATH") ?? "app.sqlite");
const store = new SqliteStore({ database: db });
await store.migrate(); // WAL mode, a busy_timeout, the records' table
db.exec(
  "CREATE TABLE IF NOT EXISTS payments (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)",
);
const pay = store.transactional(async (req, tx) => {
  const { amount } = await req.json();
  const row = tx.prepare(
    "INSERT INTO payments (amount) VALUES (?) RETURNING id",
  )
    .get(amount);
  return Response.json({ id: row!.id, amount }, { status: 201 });
});
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(pay, { store, scope: accountOf }),
);

setInterval(() => store.sweep().catch(reportError), 60_000);
