// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's PostgresStore snippet as a whole server, on port 8000,
 * against the database at `DATABASE_URL`, with the sweeper:
 *
 *     DATABASE_URL=postgres://postgres@127.0.0.1:5432/test deno run --allow-net --allow-env examples/postgres.ts
 *
 * @module
 */
import { handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { PostgresStore } from "@idempotent/http/postgres";
import postgres from "postgres";

const sql = postgres(Deno.env.get("DATABASE_URL")!);
const store = new PostgresStore({ sql, table: "app.idempotency_keys" }); // default "idempotency_keys"
await store.migrate(); // creates the schema, table and index if missing; safe from every instance at boot
Deno.serve(idempotency(handler, { store }));

setInterval(() => store.sweep({ batchSize: 1000 }).catch(reportError), 60_000);
