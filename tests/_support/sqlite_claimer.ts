// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One process of the SqliteStore two-process test: opens the file, prints
 * `ready`, waits for a line on stdin (so both processes start together),
 * claims `claim-0` … `claim-<N-1>` (a turn of the event loop between
 * claims, so the two processes interleave), and prints the keys it acquired
 * as one JSON line.
 *
 *     deno run --allow-read --allow-write tests/_support/sqlite_claimer.ts PATH N
 *
 * @module
 */
import { SqliteStore } from "../../src/stores/sqlite.ts";

const [path, n] = Deno.args;
const store = new SqliteStore({ database: path!, busyTimeoutMs: 5000 });
await store.migrate();
// deno-lint-ignore no-console
console.log("ready");
const reader = Deno.stdin.readable.getReader();
await reader.read();
const acquired: string[] = [];
for (let i = 0; i < Number(n); i++) {
  const key = `claim-${i}`;
  const claim = await store.claim(key, {
    fingerprint: String(Deno.pid),
    leaseMs: 60_000,
    ttlMs: 120_000,
  });
  if (claim.state === "acquired") acquired.push(key);
  await new Promise((resolve) => setTimeout(resolve, 0));
}
// deno-lint-ignore no-console
console.log(JSON.stringify(acquired));
store.close();
