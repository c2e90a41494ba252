// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Another process holding an SQLite file's write lock: opens PATH, prints
 * `ready`; on a line from stdin runs `BEGIN EXCLUSIVE` (waiting up to 60 s
 * for the lock, which the store under load takes all the while) and prints
 * `locked`; on the next line rolls back, prints `released <ms the lock was
 * held>` and exits.
 *
 *     deno run --allow-read --allow-write tests/_support/sqlite_locker.ts PATH
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";

const db = new DatabaseSync(Deno.args[0]!, { timeout: 60_000 });
const stdin = Deno.stdin.readable.getReader();
// deno-lint-ignore no-console
console.log("ready");
await stdin.read();
db.exec("BEGIN EXCLUSIVE");
const since = performance.now();
// deno-lint-ignore no-console
console.log("locked");
await stdin.read();
db.exec("ROLLBACK");
const held = Math.round(performance.now() - since);
db.close();
// deno-lint-ignore no-console
console.log(`released ${held}`);
