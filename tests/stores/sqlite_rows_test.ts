// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * SqliteStore on rows of any type in any column (SQLite keeps what it is
 * given): a property test that a claim acquires a row exactly when the
 * `take` statement's SQL calls it free, so that the claim's first read,
 * judged in JavaScript, never tells a free row from a held one otherwise,
 * and that every other row reads as in flight or completed, never throwing.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { freeRow } from "../../src/stores/_sqlite_sql.ts";
import { opts, sqliteStore } from "./_sqlite_fixtures.ts";

/** A column value as SQL text: times relative to the database's now, far from it. */
const value = (kind: string): string => {
  const now = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
  const values: Record<string, string> = {
    null: "NULL",
    past: `${now} - 100000`,
    future: `${now} + 100000`,
    "past real": `${now} - 100000.5`,
    "future real": `${now} + 100000.5`,
    text: "'later'",
    blob: "x'00ff'",
    one: "1",
    "one real": "1.0",
    two: "2",
    "in_flight": "'in_flight'",
    "in_flight blob": "x'696e5f666c69676874'",
    completed: "'completed'",
    token: "'t'",
  };
  return values[kind]!;
};

const times = [
  "null",
  "past",
  "future",
  "past real",
  "future real",
  "text",
  "blob",
];
const row = fc.record({
  version: fc.constantFrom("one", "one real", "two", "text", "blob"),
  state: fc.constantFrom(
    "in_flight",
    "in_flight blob",
    "completed",
    "text",
    "one",
  ),
  fingerprint: fc.constantFrom("null", "token", "one", "blob"),
  token: fc.constantFrom("null", "token", "one", "blob"),
  lease: fc.constantFrom(...times),
  expires: fc.constantFrom(...times),
});

Deno.test("SqliteStore: a claim acquires a row of any types exactly when the take statement's SQL calls it free, else reads it without throwing", async () => {
  await using s = await sqliteStore();
  const { db, store } = s;
  const isFree = db.prepare(
    `SELECT coalesce(${freeRow()}, 0) AS free FROM ${store.table} AS r WHERE slot = ?`,
  );
  let n = 0;
  const seen = new Set<string>();
  await fc.assert(
    fc.asyncProperty(row, async (r) => {
      const slot = `row-${n++}`;
      db.prepare(
        `INSERT INTO ${store.table} (slot, version, state, fingerprint, token,
          lease_until, expires_at, created_at)
        VALUES (?, ${value(r.version)}, ${value(r.state)}, ${
          value(r.fingerprint)
        },
          ${value(r.token)}, ${value(r.lease)}, ${value(r.expires)}, 0)`,
      ).run(slot);
      const free = isFree.get(slot)!.free === 1;
      const claim = await store.claim(slot, opts("mine"));
      seen.add(`${free} ${claim.state}`);
      assert.equal(claim.state === "acquired", free, JSON.stringify(r));
      if (!free) assert.notEqual(claim.state, "completed", "no such record");
    }),
    { numRuns: 300 },
  );
  // Both sides were met.
  assert.ok(seen.has("true acquired") && seen.has("false in_flight"));
});
