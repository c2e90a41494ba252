// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Another process holding an SQLite file's write lock: opens PATH, runs
 * `BEGIN EXCLUSIVE`, prints `locked`, and holds the lock until a line comes
 * on stdin; then it rolls back, prints `released` and exits.
 *
 *     deno run --allow-read --allow-write tests/_support/sqlite_locker.ts PATH
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";

const db = new DatabaseSync(Deno.args[0]!);
db.exec("BEGIN EXCLUSIVE");
// deno-lint-ignore no-console
console.log("locked");
await Deno.stdin.readable.getReader().read();
db.exec("ROLLBACK");
db.close();
// deno-lint-ignore no-console
console.log("released");
