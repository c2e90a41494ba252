// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A transactional handler serves requests no store claimed (issue 29, item
 * 9): with the README's exactly-once snippet (`examples/postgres_txn.ts`) on
 * the real PostgreSQL, with `KvStore.transactional()` on a KV file and
 * `SqliteStore.transactional()` on an SQLite file, a
 * keyless POST and a GET (not guarded) get the handler's answer and their
 * rows are committed; a handler that throws leaves none; a keyed request
 * still commits with its record and its retry replays without a new row; a
 * request another store claimed (a FailoverStore's) is still refused.
 * docs/architecture.md, Transactional handlers.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import type { TransactionSql } from "postgres";
import { idempotency } from "../../src/idempotency.ts";
import { FailoverStore } from "../../src/stores/failover.ts";
import { KvStore } from "../../src/stores/kv.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { PostgresStore } from "../../src/stores/postgres.ts";
import { SqliteStore } from "../../src/stores/sqlite.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
} from "../_support/services.ts";

const URL_ = "http://api.test/payments";

/** A POST of `{ amount }`, with a key or without. */
function pay(amount: number, key?: string): Request {
  return new Request(URL_, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(key === undefined ? {} : { "idempotency-key": key }),
    },
    body: JSON.stringify({ amount }),
  });
}

/** A GET that carries its amount in the query: a method the middleware does not guard. */
function get(amount: number): Request {
  return new Request(`${URL_}?amount=${amount}`);
}

/** The amount of a POST's body or a GET's query. */
async function amountOf(req: Request): Promise<number> {
  if (req.method === "GET") {
    return Number(new URL(req.url).searchParams.get("amount"));
  }
  return (await req.json()).amount;
}

integrationTest(
  "PostgresStore.transactional() (the README's exactly-once snippet): a keyless POST and a GET get the handler's answer with their row committed; a throw leaves no row; a keyed POST replays without a second row",
  POSTGRES_IGNORE,
  async () => {
    await using pg = await postgresSchema("txn_keyless", { max: 4 });
    const { sql, schema } = pg;
    const store = new PostgresStore({
      sql,
      table: `${schema}.idempotency_keys`,
    });
    await store.migrate();
    const payments = `"${schema}".payments`;
    await sql.unsafe(
      `CREATE TABLE ${payments} (id bigserial PRIMARY KEY, amount int NOT NULL)`,
    );
    // The snippet's handler, its amount from the body (POST) or the query (GET).
    let fail = false;
    const handler = store.transactional(async (req, tx: TransactionSql) => {
      const amount = await amountOf(req);
      const [row] = await tx.unsafe(
        `INSERT INTO ${payments} (amount) VALUES ($1) RETURNING id`,
        [amount],
      );
      if (fail) throw new Error("card declined after the insert");
      return Response.json({ id: Number(row!.id), amount }, { status: 201 });
    });
    const app = idempotency(handler, { store, scope: "global" });
    const amounts = async () =>
      (await sql.unsafe(`SELECT amount FROM ${payments} ORDER BY id`)).map(
        (r) => r.amount as number,
      );

    const keyless = await app(pay(100));
    assert.equal(keyless.status, 201);
    assert.deepEqual(await keyless.json(), { id: 1, amount: 100 });
    const probe = await app(get(7));
    assert.equal(probe.status, 201);
    assert.equal((await probe.json()).amount, 7);
    assert.deepEqual(await amounts(), [100, 7], "both committed");

    // A keyless request whose handler throws: the throw reaches the caller, no row.
    fail = true;
    await assert.rejects(async () => await app(pay(5)), /card declined/);
    await assert.rejects(async () => await app(get(6)), /card declined/);
    assert.deepEqual(await amounts(), [100, 7], "rolled back");
    fail = false;

    // Keyed, as before: the row commits with the record; the retry replays.
    const first = await app(pay(300, "k-300"));
    assert.equal(first.status, 201);
    const body = await first.text();
    const again = await app(pay(300, "k-300"));
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(await again.text(), body);
    assert.deepEqual(await amounts(), [100, 7, 300]);

    // Claimed by another store: refused, not run apart from its record.
    const failover = new FailoverStore({
      primary: new MemoryStore(),
      fallback: store,
    });
    const elsewhere = idempotency(handler, {
      store: failover,
      scope: "global",
    });
    await assert.rejects(async () => await elsewhere(pay(9, "k-9")), TypeError);
    assert.deepEqual(await amounts(), [100, 7, 300]);
  },
);

integrationTest(
  "PostgresStore.transactional(): a keyless answer of any status commits (only a throw rolls back), and its transaction has the store's statement_timeout",
  POSTGRES_IGNORE,
  async () => {
    await using pg = await postgresSchema("txn_keyless_status", { max: 4 });
    const { sql, schema } = pg;
    const store = new PostgresStore({
      sql,
      table: `${schema}.keys`,
      transaction: { statementTimeoutMs: 1_234 },
    });
    await store.migrate();
    const rows = `"${schema}".rows`;
    await sql.unsafe(`CREATE TABLE ${rows} (status int NOT NULL)`);
    const app = idempotency(
      store.transactional(async (req, tx) => {
        const status = await amountOf(req);
        await tx.unsafe(`INSERT INTO ${rows} (status) VALUES ($1)`, [status]);
        const [setting] = await tx.unsafe("SHOW statement_timeout");
        return new Response(setting!.statement_timeout as string, { status });
      }),
      { store, scope: "global" },
    );
    for (const status of [200, 400, 500]) {
      const res = await app(pay(status));
      assert.equal(res.status, status);
      assert.equal(await res.text(), "1234ms");
    }
    const found = await sql.unsafe(
      `SELECT status FROM ${rows} ORDER BY status`,
    );
    assert.deepEqual(found.map((r) => r.status), [200, 400, 500]);
  },
);

Deno.test("KvStore.transactional() on a KV file: a keyless POST and a GET commit their writes; a throw commits none; a keyed POST commits with its record and replays; a failed check throws and commits nothing", async () => {
  const path = await Deno.makeTempFile({ suffix: ".kv" });
  try {
    using kv = await Deno.openKv(path);
    const store = new KvStore({ kv, prefix: ["idem"] });
    let fail = false;
    let runs = 0;
    const handler = store.transactional(async (req, atomic) => {
      runs++;
      const amount = await amountOf(req);
      atomic.set(["payments", amount], { amount });
      if (fail) throw new Error("card declined after the write");
      return Response.json({ amount }, { status: 201 });
    });
    const app = idempotency(handler, { store, scope: "global" });
    const stored = async () => {
      const found: number[] = [];
      for await (
        const e of kv.list<{ amount: number }>({ prefix: ["payments"] })
      ) {
        found.push(e.value.amount);
      }
      return found;
    };

    const keyless = await app(pay(100));
    assert.equal(keyless.status, 201);
    assert.deepEqual(await keyless.json(), { amount: 100 });
    assert.equal((await app(get(7))).status, 201);
    assert.deepEqual(await stored(), [7, 100]);

    fail = true;
    await assert.rejects(async () => await app(pay(5)), /card declined/);
    await assert.rejects(async () => await app(get(6)), /card declined/);
    assert.deepEqual(await stored(), [7, 100]);
    fail = false;

    const first = await app(pay(300, "k-300"));
    assert.equal(first.status, 201);
    await first.text();
    const again = await app(pay(300, "k-300"));
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    await again.text();
    assert.deepEqual(await stored(), [7, 100, 300]);
    assert.equal(runs, 5);

    // A keyless check that fails: nothing commits, the caller gets the throw.
    const checked = idempotency(
      store.transactional((_req, atomic) => {
        atomic.check({ key: ["payments", 7], versionstamp: null });
        atomic.set(["payments", 8], { amount: 8 });
        return new Response("ok", { status: 201 });
      }),
      { store, scope: "global" },
    );
    await assert.rejects(
      async () => await checked(pay(8)),
      /a check of the handler's failed/,
    );
    assert.deepEqual(await stored(), [7, 100, 300]);

    // Claimed by another store: refused, as KvStore.atomic() refuses it.
    const failover = new FailoverStore({
      primary: new MemoryStore(),
      fallback: store,
    });
    const elsewhere = idempotency(handler, {
      store: failover,
      scope: "global",
    });
    await assert.rejects(
      async () => await elsewhere(pay(9, "k-9")),
      /No unit of work/,
    );
    assert.deepEqual(await stored(), [7, 100, 300]);
    assert.throws(() => store.transactional(42 as never), TypeError);
  } finally {
    await Deno.remove(path).catch(() => {});
  }
});

Deno.test("SqliteStore.transactional() on an SQLite file: a keyless POST and a GET commit their rows, whatever the status; a throw commits none; a keyed POST commits with its record and replays; a request a FailoverStore claimed is refused", async () => {
  const dir = await Deno.makeTempDir();
  const store = new SqliteStore({ database: `${dir}/app.sqlite` });
  try {
    await store.migrate();
    let fail = false;
    let runs = 0;
    const handler = store.transactional(async (req, db) => {
      runs++;
      db.exec("CREATE TABLE IF NOT EXISTS payments (amount INTEGER)");
      const amount = await amountOf(req);
      db.prepare("INSERT INTO payments (amount) VALUES (?)").run(amount);
      if (fail) throw new Error("card declined after the write");
      return Response.json({ amount }, { status: amount === 400 ? 400 : 201 });
    });
    const app = idempotency(handler, { store, scope: "global" });
    const stored = () => {
      const db = new DatabaseSync(`${dir}/app.sqlite`);
      try {
        return db.prepare("SELECT amount FROM payments ORDER BY amount").all()
          .map((row) => row.amount);
      } finally {
        db.close();
      }
    };

    const keyless = await app(pay(100));
    assert.equal(keyless.status, 201);
    assert.deepEqual(await keyless.json(), { amount: 100 });
    assert.equal((await app(get(7))).status, 201);
    assert.equal((await app(pay(400))).status, 400, "committed all the same");
    assert.deepEqual(stored(), [7, 100, 400]);

    fail = true;
    await assert.rejects(async () => await app(pay(5)), /card declined/);
    await assert.rejects(async () => await app(get(6)), /card declined/);
    assert.deepEqual(stored(), [7, 100, 400]);
    fail = false;

    const first = await app(pay(300, "k-300"));
    assert.equal(first.status, 201);
    await first.text();
    const again = await app(pay(300, "k-300"));
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    await again.text();
    assert.deepEqual(stored(), [7, 100, 300, 400]);
    assert.equal(runs, 6);

    const failover = new FailoverStore({
      primary: new MemoryStore(),
      fallback: store,
    });
    const elsewhere = idempotency(handler, {
      store: failover,
      scope: "global",
    });
    await assert.rejects(
      async () => await elsewhere(pay(9, "k-9")),
      /No transaction for this request/,
    );
    assert.deepEqual(stored(), [7, 100, 300, 400]);
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
});
