// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What a seal binds (docs/architecture.md, Store contract), tampered in a
 * real store: each bound field of a sealed record changed alone in Redis
 * (status, fingerprint, slot, the omitted reason, the key id) answers 500
 * with an `unreadable` conflict that says why, the handler never run again;
 * a body the store drops (`store_dropped`) still opens, bodiless, marked as
 * such; the same rewrite of the omitted reason in PostgreSQL and a KV file.
 * Records sealed by version 2 (no omitted reason in the additional data) and
 * 3 (the header list in the label alone) still open and replay byte for byte. In PostgreSQL, each column and part of
 * the label changed alone: status, fingerprint, slot, omitted reason, the key
 * id (to another id of the same key bytes), the version, a header beside the
 * seal, a body from another record.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createClient, RESP_TYPES } from "redis";
import { idempotency, importEncryptionKeys, slotOf } from "../mod.ts";
import type { IdempotencyEvent } from "../src/events.ts";
import fc from "fast-check";
import type { IdempotencyStore, StoredResponse } from "../src/store.ts";
import { OMITTED_REASONS, STORE_DROPPED } from "../src/stores/_shared.ts";
import { Sealer } from "../src/_seal.ts";
import { KvStore } from "../src/stores/kv.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { RedisStore } from "../src/stores/redis.ts";
import {
  completedRecord,
  decodeCompleted,
} from "../src/stores/_redis_record.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "./_support/services.ts";
import { deleteRedisKeys } from "./_support/redis.ts";
import { post } from "./_support/http.ts";

const raw = (byte: number) =>
  btoa(String.fromCharCode(...new Uint8Array(32).fill(byte)));
/** Two keys listed, k2 sealing, and the raw bytes of each. */
const BYTES = { k2: raw(2), k1: raw(1) };
const BOTH = await importEncryptionKeys(`k2:${BYTES.k2},k1:${BYTES.k1}`);
const BODY = '{"paid":"ord_1"}';

/** A sealing app over `store`: what it answered, and its events and log lines. */
function app(
  store: IdempotencyStore,
  maxResponseBytes?: number,
  encryption = BOTH,
) {
  const events: IdempotencyEvent[] = [];
  const lines: string[] = [];
  let runs = 0;
  const handler = idempotency(() => {
    runs++;
    return new Response(BODY, {
      status: 201,
      headers: { "content-type": "application/json", "x-order": "ord_1" },
    });
  }, {
    scope: "global",
    store,
    encryption,
    onEvent: (e) => events.push(e),
    logger: {
      warn: (l: unknown) => lines.push(String(l)),
      error: (l: unknown) => lines.push(String(l)),
    },
    ...(maxResponseBytes === undefined ? {} : { maxResponseBytes }),
  });
  return { handler, events, lines, runs: () => runs };
}

/** The last conflict's reason, after a 500 that did not run the handler. */
async function unreadable(
  a: ReturnType<typeof app>,
  request: Request,
): Promise<string> {
  const runs = a.runs();
  const res = await a.handler(request);
  await res.body?.cancel();
  assert.equal(res.status, 500); // problem-record-unreadable
  assert.equal(a.runs(), runs, "the handler did not run again");
  const conflict = a.events.findLast((e) => e.type === "conflict");
  assert.ok(conflict?.type === "conflict" && conflict.unreadable);
  return conflict.reason ?? "(no reason)";
}

type Rewrite = (found: { fingerprint: string; response: StoredResponse }) => {
  fingerprint: string;
  response: StoredResponse;
};

integrationTest(
  "each field a seal binds, changed alone in Redis, answers 500 naming why; a body the store dropped opens bodiless",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("seal-bind")}:`;
    const client = await createClient({ url: REDIS_URL }).connect();

    const rkey = (key: string) => prefix + slotOf("", key);
    const read = async (key: string) => {
      const value = await client.sendCommand(["GET", rkey(key)], {
        typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer },
      });
      const found = decodeCompleted(value as unknown as Buffer);
      assert.ok(found, `a completed record at ${key}`);
      return found;
    };
    const write = async (key: string, found: ReturnType<Rewrite>) => {
      const token = `${"0".repeat(36)}${found.fingerprint}`;
      const forged = completedRecord(token, found.response)!;
      await client.sendCommand(["SET", rkey(key), forged, "PX", "60000"]);
    };
    const rewrite = async (key: string, change: Rewrite, to = key) =>
      await write(to, change(await read(key)));
    try {
      const store = new RedisStore({ client, prefix });
      const a = app(store);
      const small = app(store, 4); // its bodies are too_large
      const seal = async (which: typeof a, key: string, body = "{}") => {
        const res = await which.handler(post(key, body));
        assert.equal(res.status, 201);
        await res.body?.cancel();
      };
      const keys = ["status", "fp", "fp-other", "slot", "k-id", "k-gone"];
      for (const key of keys) await seal(a, key);
      await seal(a, "fp-other", "{}"); // replay: same record
      await seal(a, "fp-b", '{"b":1}');
      for (const key of ["omitted", "dropped-wrong"]) await seal(small, key);
      await seal(a, "dropped");
      await seal(a, "dropped-as-large");
      const label = (await read("status")).response.headers[0]!;
      assert.match(label[1], /^4;k2;/);

      // The status.
      await rewrite("status", (f) => ({
        ...f,
        response: { ...f.response, status: 200 },
      }));
      const altered =
        /^does not open under key id "k2": altered in the store, or moved/;
      assert.match(await unreadable(a, post("status")), altered);

      // The fingerprint: another request's, so that request finds it.
      const other = (await read("fp-b")).fingerprint;
      await rewrite("fp", (f) => ({ ...f, fingerprint: other }));
      assert.match(await unreadable(a, post("fp", '{"b":1}')), altered);

      // The slot: the record copied under another key.
      await rewrite("slot", (f) => f, "slot-copy");
      assert.match(await unreadable(a, post("slot-copy")), altered);
      const orig = await a.handler(post("slot")); // the original still opens
      assert.equal(await orig.text(), BODY);

      // The omitted reason: too_large rewritten to stream_error, or to the
      // store's own store_dropped (which only a record with a body can be).
      const sizes = ["omitted", "dropped-wrong"];
      const reasons = ["stream_error", "store_dropped"] as const;
      for (const [i, key] of sizes.entries()) {
        const f = await read(key);
        assert.equal(f.response.omitted, "too_large");
        await write(key, {
          ...f,
          response: { ...f.response, omitted: reasons[i]! },
        });
        assert.match(await unreadable(small, post(key)), altered);
      }

      // The key id: another listed key's, or one not listed.
      for (const [key, id] of [["k-id", "k1"], ["k-gone", "k9"]] as const) {
        await rewrite(key, (f) => {
          const [, value] = f.response.headers[0]!;
          const moved = value.replace(/^4;k2;/, `4;${id};`);
          return {
            ...f,
            response: { ...f.response, headers: [[label[0], moved]] },
          };
        });
      }
      assert.match(
        await unreadable(a, post("k-id")),
        /^does not open under key id "k1"/,
      );
      // A fresh app's first log line names the key id (the log is rate-limited).
      const fresh = app(store);
      assert.equal(
        await unreadable(fresh, post("k-gone")),
        'sealed under key id "k9", not among the keys given',
      );
      const conflict = fresh.events.findLast((e) => e.type === "conflict");
      assert.ok(conflict?.type === "conflict");
      assert.equal(conflict.keyId, "k9");
      assert.equal(fresh.lines.length, 1);
      assert.ok(
        fresh.lines[0]!.startsWith(
          `[@idempotent/http] unreadable: a key's record could not be read, so it answers 500 and never runs the handler: sealed under key id "k9", not among the keys given; list key id "k9" in 'encryption.keys' again (after the sealing key) and it replays: forgetting it would run its handler again; it stays until it expires at `,
        ),
        fresh.lines[0],
      );
      assert.match(
        a.lines[0]!,
        /unreadable: .*: does not open under key id "k2"/,
      );

      // The body dropped by a store: it opens bodiless, marked store_dropped.
      const dropped = await read("dropped");
      await write("dropped", {
        ...dropped,
        response: { ...dropped.response, body: null, omitted: "store_dropped" },
      });
      const replay = await a.handler(post("dropped"));
      assert.equal(replay.status, 201);
      assert.equal(
        replay.headers.get("idempotent-body-omitted"),
        "store_dropped",
      );
      assert.equal(replay.headers.get("x-order"), "ord_1");
      assert.equal(await replay.text(), "");
      // Marked as the middleware's own too_large instead: it does not open.
      await write("dropped-as-large", {
        ...dropped,
        response: { ...dropped.response, body: null, omitted: "too_large" },
      });
      assert.match(
        await unreadable(a, post("dropped-as-large")),
        /^does not open/,
      );
      assert.equal(a.runs(), 9, "each key ran once");
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  },
);

integrationTest(
  "each field a seal binds, changed alone in PostgreSQL, answers 500 and runs nothing; the key id is bound even under the same key bytes",
  POSTGRES_IGNORE,
  async () => {
    await using db = await postgresSchema("sealfields");
    const table = `"${db.schema}".idempotency_keys`;
    const store = new PostgresStore({
      sql: db.sql,
      table: `${db.schema}.idempotency_keys`,
    });
    await store.migrate();
    // k3 holds k2's bytes: a key renamed in a rotation. Only the bound id
    // tells a record sealed as k2 from one relabelled k3.
    const keys = await importEncryptionKeys(
      `k2:${BYTES.k2},k1:${BYTES.k1},k3:${BYTES.k2}`,
    );
    const a = app(store, undefined, keys);
    const small = app(store, 4, keys);
    const names = [
      "status",
      "fp",
      "fp-b",
      "slot",
      "id-same-bytes",
      "version",
      "extra",
      "body",
      "body-other",
      "control",
    ];
    for (const key of names) {
      const res = await a.handler(post(key, key === "fp-b" ? '{"b":1}' : "{}"));
      assert.equal(res.status, 201, key);
      await res.body?.cancel();
    }
    // Bodiless (too_large): only the header's additional data binds these.
    for (const key of ["omitted", "id-bodiless"]) {
      await (await small.handler(post(key))).body?.cancel();
    }
    const slot = (key: string) => slotOf("", key);
    const update = async (key: string, set: string, ...values: unknown[]) => {
      const rows = await db.sql.unsafe(
        `UPDATE ${table} SET ${set} WHERE slot = $1 RETURNING slot`,
        [slot(key), ...values] as never[],
      );
      assert.equal(rows.length, 1, key);
    };
    const label = async (key: string): Promise<string> => {
      const [row] = await db.sql.unsafe(
        `SELECT headers->0->>1 AS label FROM ${table} WHERE slot = $1`,
        [slot(key)],
      );
      return String(row!.label);
    };
    const relabel = async (key: string, to: (label: string) => string) =>
      await update(
        key,
        `headers = jsonb_build_array(jsonb_build_array('idempotent-sealed', $2::text))`,
        to(await label(key)),
      );
    const altered = /^does not open under key id "k[23]"/;

    // Each change alone: the control row is left as it was and still opens.
    await update("status", "status = 200");
    const [b] = await db.sql.unsafe(
      `SELECT fingerprint, body FROM ${table} WHERE slot = $1`,
      [slot("fp-b")],
    );
    await update("fp", "fingerprint = $2", b!.fingerprint);
    await db.sql.unsafe(`UPDATE ${table} SET slot = $2 WHERE slot = $1`, [
      slot("slot"),
      slot("slot-moved"),
    ]);
    await update("omitted", "omitted = 'too_slow'");
    for (const key of ["id-same-bytes", "id-bodiless"]) {
      await relabel(key, (l) => l.replace(/^4;k2;/, "4;k3;"));
    }
    await relabel("version", (l) => l.replace(/^4;/, "3;"));
    await update(
      "extra",
      `headers = headers || '[["x-order","ord_2"]]'::jsonb`,
    );
    const [other] = await db.sql.unsafe(
      `SELECT body FROM ${table} WHERE slot = $1`,
      [slot("body-other")],
    );
    await update("body", "body = $2", other!.body);

    const cases: [string, Request, typeof a][] = [
      ["status", post("status"), a],
      ["fingerprint", post("fp", '{"b":1}'), a],
      ["slot", post("slot-moved"), a],
      ["omitted", post("omitted"), small],
      ["key id", post("id-same-bytes"), a],
      ["key id, no body", post("id-bodiless"), small],
      ["version", post("version"), a],
      ["a header beside the seal", post("extra"), a],
      ["another record's body", post("body"), a],
    ];
    for (const [what, request, which] of cases) {
      const reason = await unreadable(which, request);
      assert.match(reason, altered, what);
    }
    const control = await a.handler(post("control"));
    assert.equal(control.status, 201);
    assert.equal(control.headers.get("idempotent-replayed"), "true");
    assert.equal(await control.text(), BODY);
    assert.equal(a.runs(), names.length, "each key ran once");
  },
);

/**
 * A record sealed as an earlier version sealed it: version 2 (no omitted
 * reason in the additional data) or 3 (the body's seal holds the body alone).
 */
async function sealOld(
  version: "2" | "3",
  bytes: string,
  slot: string,
  fingerprint: string,
  record: StoredResponse,
): Promise<StoredResponse> {
  const raw = Uint8Array.from(atob(bytes), (c) => c.charCodeAt(0));
  const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, [
    "encrypt",
  ]);
  const enc = async (data: string, plain: Uint8Array<ArrayBuffer>) => {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const additionalData = new TextEncoder().encode(data);
    const c = await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData },
      key,
      plain,
    );
    const out = new Uint8Array(12 + c.byteLength);
    out.set(iv);
    out.set(new Uint8Array(c), 12);
    return out;
  };
  const bound = [version, "k1", slot, fingerprint, record.status];
  const clear = JSON.stringify(version === "2" ? bound : [...bound, ""]);
  const headers = new TextEncoder().encode(JSON.stringify(record.headers));
  const sealed = btoa(String.fromCharCode(...await enc(clear, headers)))
    .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  const label = `${version};k1;${sealed}`;
  const body = record.body as Uint8Array<ArrayBuffer> | null;
  return {
    ...record,
    headers: [["idempotent-sealed", label]],
    body: body && await enc(clear + label, body),
  };
}

for (const version of ["2", "3"] as const) {
  Deno.test(`a record sealed by version ${version} still opens, and replays byte for byte what one in clear replays`, async () => {
    const store = new MemoryStore();
    const slot = slotOf("", "v2");
    const { handler: clear } = app(new MemoryStore());
    const plain = await clear(post("v2"));
    const expected = {
      status: plain.status,
      headers: [...plain.headers],
      body: await plain.text(),
    };
    // The fingerprint of post("v2"), as a record in clear keeps it.
    const probe = new MemoryStore();
    await (await idempotency(() => new Response(), {
      scope: "global",
      store: probe,
    })(post("v2"))).text();
    const peeked = await probe.peek(slot);
    assert.ok(peeked.state === "completed");
    const fingerprint = peeked.fingerprint;

    const record: StoredResponse = {
      status: 201,
      headers: [["content-type", "application/json"], ["x-order", "ord_1"]],
      body: new TextEncoder().encode(BODY),
    };
    const sealed = await sealOld(version, BYTES.k1, slot, fingerprint, record);
    const own = await store.claim(slot, {
      fingerprint,
      leaseMs: 1_000,
      ttlMs: 60_000,
    });
    assert.ok(own.state === "acquired");
    assert.equal(await store.complete(slot, own.token, sealed), "applied");
    const a = app(store);
    const replay = await a.handler(post("v2"));
    assert.deepEqual({
      status: replay.status,
      headers: [...replay.headers].filter(([n]) => n !== "idempotent-replayed"),
      body: await replay.text(),
    }, {
      ...expected,
      headers: expected.headers.filter(([n]) => n !== "idempotent-replayed"),
    });
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.equal(a.runs(), 0);
  });
}

/** Rewrites a bodiless sealed record's omitted reason in the store, then replays it. */
async function omittedRewritten(
  store: IdempotencyStore,
  set: (slot: string, reason: string) => Promise<void>,
): Promise<void> {
  const a = app(store, 4);
  const first = await a.handler(post("om"));
  await first.body?.cancel();
  const replay = await a.handler(post("om"));
  assert.equal(replay.headers.get("idempotent-body-omitted"), "too_large");
  await replay.body?.cancel();
  await set(slotOf("", "om"), "stream_error");
  assert.match(
    await unreadable(a, post("om")),
    /^does not open under key id "k2"/,
  );
}

integrationTest(
  "a sealed record's omitted reason rewritten in PostgreSQL answers 500",
  POSTGRES_IGNORE,
  async () => {
    await using db = await postgresSchema("sealbind");
    const table = `${db.schema}.idempotency_keys`;
    const store = new PostgresStore({ sql: db.sql, table });
    await store.migrate();
    await omittedRewritten(store, async (slot, reason) => {
      const rows = await db.sql.unsafe(
        `UPDATE "${db.schema}".idempotency_keys SET omitted = $2 WHERE slot = $1 RETURNING slot`,
        [slot, reason],
      );
      assert.equal(rows.length, 1);
    });
  },
);

Deno.test("a sealed record's omitted reason rewritten in a KV file answers 500", async () => {
  const path = await Deno.makeTempFile({ suffix: ".db" });
  const kv = await Deno.openKv(path);
  try {
    await omittedRewritten(new KvStore({ kv }), async (slot, reason) => {
      const key = ["idempotency", "rec", slot];
      const entry = await kv.get<Record<string, unknown>>(key);
      assert.equal(entry.value?.omitted, "too_large");
      await kv.set(key, { ...entry.value, omitted: reason });
    });
  } finally {
    kv.close();
    await Deno.remove(path);
  }
});

Deno.test("property: a sealed record opens as it was; any one bound field changed does not; a body dropped as store_dropped opens bodiless", async () => {
  const sealer = Sealer.of(BOTH)!;
  const record = fc.oneof(
    fc.record({
      status: fc.integer({ min: 200, max: 599 }),
      headers: fc.array(
        fc.tuple(fc.constantFrom("etag", "x-a", "content-type"), fc.string()),
        { maxLength: 3 },
      ),
      body: fc.uint8Array({ maxLength: 64 }),
    }),
    fc.record({
      status: fc.integer({ min: 200, max: 599 }),
      headers: fc.constant([] as [string, string][]),
      body: fc.constant(null),
      omitted: fc.constantFrom(
        ...OMITTED_REASONS.filter((r) => r !== STORE_DROPPED),
      ),
    }),
  ) as fc.Arbitrary<StoredResponse>;
  const tamper = fc.constantFrom(
    "status",
    "slot",
    "fingerprint",
    "omitted",
    "keyId",
    "extra header",
  );
  await fc.assert(
    fc.asyncProperty(record, tamper, async (plain, what) => {
      const headers = plain.headers.filter(([, v]) => /^[\x20-\x7e]*$/.test(v));
      const clear = { ...plain, headers };
      const sealed = await sealer.seal("slot", "fp", clear);
      const opened = await sealer.read("slot", "fp", sealed);
      assert.deepEqual(opened.record, clear);
      let slot = "slot";
      let fingerprint = "fp";
      let forged: StoredResponse = { ...sealed };
      const [[name, label]] = sealed.headers as [[string, string]];
      if (what === "status") forged.status = sealed.status === 200 ? 201 : 200;
      if (what === "slot") slot = "other";
      if (what === "fingerprint") fingerprint = "fp2";
      if (what === "omitted") {
        forged = sealed.body === null
          ? {
            ...sealed,
            omitted: sealed.omitted === "too_slow" ? "too_large" : "too_slow",
          }
          : { ...sealed, body: null, omitted: "too_large" };
      }
      if (what === "keyId") {
        forged.headers = [[name, label.replace(/^4;k2;/, "4;k1;")]];
      }
      if (what === "extra header") forged.headers = [[name, label], ["x", "1"]];
      const read = await sealer.read(slot, fingerprint, forged);
      assert.equal(read.record, null, what);
      assert.ok(
        read.record === null && /^does not open under key id/.test(read.reason),
        what,
      );
      if (sealed.body !== null) {
        const dropped = {
          ...sealed,
          body: null,
          omitted: STORE_DROPPED,
        } as const;
        const bodiless = await sealer.read("slot", "fp", dropped);
        assert.deepEqual(bodiless.record, {
          ...clear,
          body: null,
          omitted: STORE_DROPPED,
        });
      }
    }),
    { numRuns: 200 },
  );
});
