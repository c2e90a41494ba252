// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's PostgresStore snippet as a whole server, on 127.0.0.1:8000,
 * against the database at `DATABASE_URL`, with the sweeper:
 *
 *     deno run --allow-net --allow-env examples/postgres.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { PostgresStore } from "@idempotent/http/postgres";
import postgres from "postgres";

const url = Deno.env.get("DATABASE_URL") ??
  "postgres://postgres@127.0.0.1/test";
const sql = postgres(url);
const store = new PostgresStore({ sql, table: "app.idempotency_keys" });
await store.migrate(); // creates what is missing; safe from every instance
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(handler, { store, scope: accountOf }),
);

setInterval(() => store.sweep({ batchSize: 1000 }).catch(reportError), 60_000);
