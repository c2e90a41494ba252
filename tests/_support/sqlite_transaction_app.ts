// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One app process of the SqliteStore transactional crash tests, guarded by a
 * SqliteStore on PATH: the server, its points and the `listening <port>` line
 * are `tests/_support/transaction_app.ts`'s; the effect row goes into the
 * file's `effects` table (the write lock held from its INSERT).
 *
 *     deno run --allow-net --allow-env --allow-read --allow-write tests/_support/sqlite_transaction_app.ts PATH CONTROL_URL LEASE_MS
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import { serveTransactionApp } from "./transaction_app.ts";

const [path, control, lease] = Deno.args;
const store = new SqliteStore({ database: path!, busyTimeoutMs: 200 });

serveTransactionApp<DatabaseSync>({
  store,
  transactional: (handler) => store.transactional(handler),
  insert: (db, key) =>
    db.prepare("INSERT INTO effects (key, pid) VALUES (?, ?)").run(
      key,
      Deno.pid,
    ),
  control: control!,
  lease: Number(lease),
});
