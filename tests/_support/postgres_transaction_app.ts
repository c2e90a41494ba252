// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One app process of the PostgreSQL transactional crash tests, guarded by a
 * PostgresStore: the server, its points and the `listening <port>` line are
 * `tests/_support/transaction_app.ts`'s; the effect row goes into EFFECTS.
 *
 *     deno run --allow-net --allow-env --allow-read tests/_support/postgres_transaction_app.ts DATABASE_URL TABLE EFFECTS CONTROL_URL LEASE_MS
 *
 * @module
 */
import postgres, { type TransactionSql } from "postgres";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { serveTransactionApp } from "./transaction_app.ts";

const [url, table, effects, control, lease] = Deno.args;
const sql = postgres(url!, {
  max: 8,
  onnotice: () => {},
  connect_timeout: 2,
  backoff: () => 0.1,
});
const store = new PostgresStore({ sql, table: table! });

serveTransactionApp<TransactionSql>({
  store,
  transactional: (handler) => store.transactional(handler),
  insert: (tx, key) =>
    tx.unsafe(`INSERT INTO ${effects} (key, pid) VALUES ($1, $2)`, [
      key,
      Deno.pid,
    ]),
  control: control!,
  lease: Number(lease),
});
