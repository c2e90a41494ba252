// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Case 3 of the fault-injection suite: a real PostgresStore under load with
 * duplicates (300 keys, 3 requests each, 16 at a time), while its own
 * backends are terminated (`pg_terminate_backend`, three times during the
 * load), or while its table is locked (`LOCK TABLE … IN ACCESS EXCLUSIVE
 * MODE`) for longer than the store's `timeoutMs`.
 *
 * It runs on the shared PostgreSQL and touches nothing but what it owns: a
 * table named for this run, and the store's connections, found by an
 * `application_name` unique to this run.
 *
 * Allowed: a 503 problem while the store's statements fail or time out.
 * Nothing is lost by PostgreSQL, and no fault lasts a lease, so there is no
 * window: everything else is a failure (a second execution of a key, an
 * answer that is not the handler's bytes or a problem, a key still in flight
 * half a lease after the load is over and the store answers again).
 *
 * The store's client is set up as the PostgresStore docs recommend for
 * postgres.js 3.4.9 (`connect_timeout` and `backoff` short): with its
 * defaults, a pool whose backends were terminated under load stays
 * unreachable for 10 s to minutes (a connection whose socket died with a
 * write queued never sends again until its connect times out, and the wait
 * before a reconnect grows with every connection lost, up to 20 s). While
 * it reconnects the store answers 503, which is allowed and not counted as
 * time in flight, for at most `UNREACHABLE_MS` after the load.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../src/stores/postgres.ts";
import {
  DATABASE_URL,
  POSTGRES_IGNORE,
  testName,
  uniquePrefix,
} from "../_support/services.ts";
import {
  assertNoHarm,
  duplicates,
  guardedApp,
  load,
  loadFigures,
  pool,
  report,
  settle,
  tally,
} from "./_load.ts";
import { waitFor } from "../_support/time.ts";

const KEYS = 300;
const DUPLICATES = 3;
const CONCURRENCY = 16;
const TIMEOUT_MS = 300;
const LEASE = 10_000;
/** How long the driver may take to reconnect after the load (503s only). */
const UNREACHABLE_MS = 30_000;

type Fault = "terminate" | "lock";

async function underLoad(fault: Fault): Promise<void> {
  const table = uniquePrefix(`faults_${fault}`);
  const application = uniquePrefix("faults_store");
  const sql = postgres(DATABASE_URL, {
    onnotice: () => {},
    max: 8,
    connection: { application_name: application },
    connect_timeout: 1,
    backoff: () => 0.1,
  });
  const admin = postgres(DATABASE_URL, { onnotice: () => {}, max: 2 });
  try {
    const store = new PostgresStore({ sql, table, timeoutMs: TIMEOUT_MS });
    await store.migrate();
    const { ledger, send, storeErrors } = guardedApp(store, LEASE);
    const keys = Array.from({ length: KEYS }, (_, i) => `${fault}-k${i}`);
    let faults = 0;
    const points = fault === "terminate" ? [0.25, 0.5, 0.75] : [1 / 3];
    const seen = tally();
    await load(send, ledger, {
      keys,
      duplicates: DUPLICATES,
      concurrency: CONCURRENCY,
      async progress(done, total) {
        if (faults >= points.length || done < total * points[faults]!) return;
        if (fault === "terminate") {
          faults++;
          await admin.unsafe(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE application_name = $1 AND pid <> pg_backend_pid()`,
            [application],
          );
          return;
        }
        faults++;
        const before = storeErrors();
        await admin.begin(async (tx) => {
          await tx.unsafe(`LOCK TABLE "${table}" IN ACCESS EXCLUSIVE MODE`);
          // Longer than timeoutMs: until statements have timed out on it.
          await waitFor(
            "store errors while the table is locked",
            () => storeErrors() >= before + 5,
          );
        });
      },
    }, seen);
    assert.equal(faults, points.length, "every fault was injected");
    const settled = await settle(
      send,
      ledger,
      keys,
      LEASE / 2,
      seen,
      CONCURRENCY,
      UNREACHABLE_MS,
    );
    const dup = duplicates(ledger);
    report(`postgres ${fault}`, {
      faults,
      storeErrors: storeErrors(),
      ...loadFigures(seen, ledger, dup, settled),
    });
    assertNoHarm(dup, seen, settled);
  } finally {
    // A statement the store gave up on may still be queued in the driver.
    await sql.end({ timeout: 1 });
    await admin.unsafe(`DROP TABLE IF EXISTS "${table}"`).catch(() => {});
    await admin.end({ timeout: 1 });
  }
}

Deno.test({
  name: testName(
    "faults: PostgresStore with its backends terminated, under load with duplicates",
    POSTGRES_IGNORE,
  ),
  ignore: POSTGRES_IGNORE !== false,
  fn: () => underLoad("terminate"),
});

Deno.test({
  name: testName(
    "faults: PostgresStore with its table locked past timeoutMs, under load with duplicates",
    POSTGRES_IGNORE,
  ),
  ignore: POSTGRES_IGNORE !== false,
  fn: () => underLoad("lock"),
});

/**
 * Below the middleware: while its table is locked past `timeoutMs`, many
 * claims time out; every claim that answers must answer about its own slot.
 * 300 completed slots, each with its own fingerprint and body, claimed again
 * four times each, 16 at a time, while the lock lasts and after.
 *
 * Allowed: a `StoreError` (the claim timed out). Everything else is a
 * failure: another state than `completed`, or another slot's fingerprint or
 * body (a reply crossed between statements).
 */
Deno.test({
  name: testName(
    "faults: PostgresStore claims that time out on a locked table never answer another slot's record",
    POSTGRES_IGNORE,
  ),
  ignore: POSTGRES_IGNORE !== false,
  async fn() {
    const table = uniquePrefix("faults_cross");
    const sql = postgres(DATABASE_URL, { onnotice: () => {}, max: 8 });
    const admin = postgres(DATABASE_URL, { onnotice: () => {}, max: 2 });
    try {
      const store = new PostgresStore({ sql, table, timeoutMs: TIMEOUT_MS });
      await store.migrate();
      // The records are written before the lock with no deadline to speak
      // of: on a loaded machine a write may take longer than TIMEOUT_MS.
      const seed = new PostgresStore({ sql, table, timeoutMs: 60_000 });
      const slots = 300;
      const options = (i: number) => ({
        fingerprint: `fp-${i}`,
        leaseMs: LEASE,
        ttlMs: 600_000,
      });
      const body = (i: number) => new TextEncoder().encode(`body-${i}`);
      for (let i = 0; i < slots; i++) {
        const claim = await seed.claim(`slot-${i}`, options(i));
        assert.equal(claim.state, "acquired");
        if (claim.state !== "acquired") continue;
        await seed.complete(`slot-${i}`, claim.token, {
          status: 201,
          headers: [],
          body: body(i),
        });
      }
      let timedOut = 0;
      let right = 0;
      const crossed: string[] = [];
      const claims = Array.from({ length: slots * 4 }, (_, n) => n % slots);
      let locked = true;
      // The claims start once the lock is held: on a loaded machine they
      // could otherwise all finish before it, and none would time out.
      let held!: () => void;
      const holding = new Promise<void>((resolve) => held = resolve);
      const lock = admin.begin(async (tx) => {
        await tx.unsafe(`LOCK TABLE "${table}" IN ACCESS EXCLUSIVE MODE`);
        held();
        await waitFor("claims to time out on the lock", () => timedOut >= 20);
        locked = false;
      });
      await Promise.race([holding, lock]);
      await pool(claims, 16, async (i) => {
        let claim;
        try {
          claim = await store.claim(`slot-${i}`, options(i));
        } catch {
          timedOut++;
          return;
        }
        const text = claim.state === "completed" && claim.response.body
          ? new TextDecoder().decode(claim.response.body)
          : "";
        if (
          claim.state === "completed" && claim.fingerprint === `fp-${i}` &&
          text === `body-${i}`
        ) {
          right++;
        } else {
          crossed.push(
            `slot-${i}: ${claim.state} ${
              claim.state === "completed" ? `${claim.fingerprint} ${text}` : ""
            }`,
          );
        }
      });
      await lock;
      report("postgres claims under a lock", {
        claims: claims.length,
        timedOut,
        right,
        crossed: crossed.length,
        stillLockedAtEnd: locked,
      });
      assert.deepEqual(crossed.slice(0, 5), [], "answers about another slot");
    } finally {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP TABLE IF EXISTS "${table}"`).catch(() => {});
      await admin.end({ timeout: 1 });
    }
  },
});
