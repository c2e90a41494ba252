// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One app process of the MySQL transactional crash tests, guarded by a
 * MysqlStore: the server, its points and the `listening <port>` line are
 * `tests/_support/transaction_app.ts`'s; the effect row goes into EFFECTS.
 *
 *     deno run --allow-net --allow-env --allow-read tests/_support/mysql_transaction_app.ts MYSQL_URL TABLE EFFECTS CONTROL_URL LEASE_MS
 *
 * @module
 */
import mysql from "mysql2/promise";
import { type MysqlConnection, MysqlStore } from "../../src/stores/mysql.ts";
import { serveTransactionApp } from "./transaction_app.ts";

const [url, table, effects, control, lease] = Deno.args;
const pool = mysql.createPool({
  uri: url!,
  connectionLimit: 8,
  connectTimeout: 2000,
});
const store = new MysqlStore({ pool, table: table! });

serveTransactionApp<MysqlConnection>({
  store,
  transactional: (handler) => store.transactional(handler),
  insert: (tx, key) =>
    tx.execute(`INSERT INTO ${effects} (k, pid) VALUES (?, ?)`, [
      key,
      Deno.pid,
    ]),
  control: control!,
  lease: Number(lease),
});
