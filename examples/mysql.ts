// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's MysqlStore snippet as a whole server, on 127.0.0.1:8000,
 * against the MySQL 8 or MariaDB database at `MYSQL_URL`, with the sweeper:
 *
 *     deno run --allow-net --allow-env examples/mysql.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { MysqlStore } from "@idempotent/http/mysql";
import mysql from "mysql2/promise";

const uri = Deno.env.get("MYSQL_URL") ?? "mysql://root@127.0.0.1:3306/test";
const pool = mysql.createPool({ uri, connectionLimit: 10 });
const store = new MysqlStore({ pool, table: "example_idempotency_keys" });
await store.migrate(); // the table and its claim procedure; safe from every instance
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(handler, { store, scope: accountOf }),
);

setInterval(() => store.sweep({ batchSize: 1000 }).catch(reportError), 60_000);
