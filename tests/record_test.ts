// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A completed record whose headers are valid JSON but not valid HTTP reads
 * as unreadable (500 `unreadable`, handler not run) in every store, never as an exception
 * on every retry (issue 9, defect 5). The bad records are written straight
 * into real Redis, PostgreSQL and Deno KV, over a record the store wrote.
 *
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import type postgres from "postgres";
import { createClient } from "redis";
import {
  idempotency,
  type IdempotencyStore,
  MemoryStore,
  PROBLEM_TYPES,
  slotOf,
} from "../mod.ts";
import {
  assertStoredResponse,
  isHeaderPair,
  isStatus,
  toStoredResponse,
  unreadable,
} from "../src/_record.ts";
import { OMITTED_REASONS } from "../src/stores/_shared.ts";
import { FailoverStore } from "../src/stores/failover.ts";
import { KvStore } from "../src/stores/kv.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { fetchPost, post, serveLocal } from "./_support/http.ts";
import {
  deleteRedisKeys,
  redisRecordState,
  setRedisRecordHeaders,
} from "./_support/redis.ts";
import {
  POSTGRES_IGNORE,
  postgresSchema,
  REDIS_IGNORE,
  REDIS_URL,
  testName,
  uniquePrefix,
} from "./_support/services.ts";

/** Header lists that are valid JSON string pairs but not valid HTTP. */
const BAD: Record<string, [string, string][]> = {
  "a name with a space": [["x probe", "v"]],
  "an empty name": [["", "v"]],
  "a non-ASCII name": [["x-\u00e9", "v"]],
  "a separator in a name": [["x-pro:be", "v"]],
  "CR LF in a value": [["x-probe", "a\r\nset-cookie: evil=1"]],
  "a NUL in a value": [["x-probe", "a\u0000b"]],
  "a control character in a value": [["x-probe", "a\u0001b"]],
  "DEL in a value": [["x-probe", "a\u007fb"]],
  "non-Latin-1 text in a value": [["x-probe", "\u20ac"]],
};
/** The kinds PostgreSQL's jsonb can hold (it refuses \u0000). */
const BAD_IN_JSONB = Object.keys(BAD).filter((k) => k !== "a NUL in a value");

/** What the handler answers: one good pair, the one the tamper replaces. */
const PROBE: [string, string] = ["x-probe", "fine"];

function counted() {
  const state = { runs: 0 };
  const handler = () => {
    state.runs++;
    return new Response("done", {
      status: 201,
      headers: [["content-type", "text/plain"], PROBE],
    });
  };
  return { state, handler };
}

/** The header list a tamper writes: the record's own, with the probe replaced. */
function tampered(kind: string): [string, string][] {
  return [["content-type", "text/plain"], ...BAD[kind]!];
}

/**
 * Runs one key through the middleware, damages its record with `tamper`,
 * and checks that the retry is the 500 `unreadable` problem and the handler ran once.
 */
async function throughMiddleware(
  store: IdempotencyStore,
  kind: string,
  tamper: (slot: string, headers: [string, string][]) => Promise<void>,
  expect: "conflict" | "conflict_or_replay" = "conflict",
): Promise<void> {
  const { state, handler } = counted();
  const guarded = idempotency(handler, { scope: "global", store });
  const key = `bad-${crypto.randomUUID()}`;
  const first = await guarded(post(key));
  assert.equal(first.status, 201);
  await first.body?.cancel();
  await tamper(slotOf("", key), tampered(kind));
  for (let i = 0; i < 2; i++) {
    const retry = await guarded(post(key));
    if (expect === "conflict_or_replay" && retry.status === 201) {
      // An intact copy elsewhere answered: a replay, never a second run.
      assert.equal(retry.headers.get("idempotent-replayed"), "true", kind);
      assert.equal(await retry.text(), "done");
      continue;
    }
    assert.equal(retry.status, 500, kind);
    assert.equal(retry.headers.get("retry-after"), null, kind);
    assert.equal((await retry.json()).type, PROBLEM_TYPES.unreadable);
  }
  assert.equal(state.runs, 1, kind);
}

// --- the checks themselves ---------------------------------------------------

Deno.test("toStoredResponse refuses every header list that is not valid HTTP", () => {
  for (const [kind, headers] of Object.entries(BAD)) {
    assert.equal(
      toStoredResponse(
        200,
        [["content-type", "text/plain"], ...headers],
        new Uint8Array(1),
        undefined,
      ),
      null,
      kind,
    );
  }
  // What HTTP allows: obs-text, a tab inside a value, an empty value.
  const fine: [string, string][] = [
    ["x-latin", "caf\u00e9 \u00ff"],
    ["x-tab", "a\tb"],
    ["x-empty", ""],
    ["X-Upper", "v"],
  ];
  assert.deepEqual(
    toStoredResponse(200, fine, new Uint8Array(1), undefined)?.headers,
    fine,
  );
});

Deno.test("a record's status is an integer from 200 to 599, both ends included", () => {
  for (const status of [200, 201, 599]) {
    assert.equal(isStatus(status), true, `${status}`);
    assertStoredResponse({ status, headers: [], body: new Uint8Array(0) });
  }
  for (const status of [199, 600, 200.5, "200", NaN]) {
    assert.equal(isStatus(status), false, `${status}`);
    assert.equal(toStoredResponse(status, [], new Uint8Array(0), null), null);
  }
});

Deno.test("a record holds a body or the reason it was left out, never both or neither", () => {
  const body = new Uint8Array(1);
  for (const none of [undefined, null, ""]) {
    assert.deepEqual(toStoredResponse(200, [], body, none)?.body, body);
    assert.equal(toStoredResponse(200, [], null, none), null, `${none}`);
  }
  for (const reason of OMITTED_REASONS) {
    assert.equal(toStoredResponse(200, [], body, reason), null, reason);
    assert.deepEqual(toStoredResponse(200, [], null, reason), {
      status: 200,
      headers: [],
      body: null,
      omitted: reason,
    });
  }
  assert.equal(toStoredResponse(200, [], null, "too large"), null);
});

Deno.test("a header value is tab, space to '~' and obs-text (0x80–0xff), nothing next to them", () => {
  for (const code of [0x09, 0x20, 0x7e, 0x80, 0xff]) {
    assert.equal(isHeaderPair("x", `a${String.fromCharCode(code)}`), true);
  }
  for (const code of [0x08, 0x0a, 0x1f, 0x7f, 0x100]) {
    assert.equal(isHeaderPair("x", `a${String.fromCharCode(code)}`), false);
  }
});

Deno.test("an unreadable claim's hint is rounded up to whole ms, at least 1", () => {
  const hints = [0, -5, 0.2, 1, 1.2, 2, 2_500].map((ms) => {
    const claim = unreadable(ms);
    assert.equal(claim.state === "in_flight" && claim.fingerprint, null);
    return claim.state === "in_flight" ? claim.retryAfterMs : NaN;
  });
  assert.deepEqual(hints, [1, 1, 1, 1, 2, 2, 2_500]);
});

Deno.test("property: a pair the check accepts is one new Response() accepts", () => {
  const char = fc.oneof(
    fc.integer({ min: 0, max: 0x17f }).map((c) => String.fromCharCode(c)),
    fc.constantFrom(" ", "\t", "\r", "\n", "\u0000", ":", "a", "\u00e9"),
  );
  const text = fc.string({ unit: char, maxLength: 6 });
  fc.assert(
    fc.property(text, text, (name, value) => {
      if (!isHeaderPair(name, value)) return;
      new Response(null, { headers: [[name, value]] });
    }),
    { numRuns: 20_000 },
  );
});

Deno.test("property: every pair Headers yields without a control character passes the check", () => {
  // So a record the middleware wrote always reads back.
  const char = fc.oneof(
    fc.integer({ min: 0, max: 0xff }).map((c) => String.fromCharCode(c)),
    fc.constantFrom("a", "-", " ", "\t"),
  );
  const text = fc.string({ unit: char, maxLength: 6 });
  // deno-lint-ignore no-control-regex -- matching control characters is the point
  const control = /[\x00-\x08\x0a-\x1f\x7f]/;
  fc.assert(
    fc.property(text, text, (name, value) => {
      let headers: Headers;
      try {
        headers = new Headers([[name, value]]);
      } catch {
        return;
      }
      for (const [n, v] of headers) {
        assert.equal(
          isHeaderPair(n, v),
          !control.test(v),
          JSON.stringify([n, v]),
        );
      }
    }),
    { numRuns: 20_000 },
  );
});

// --- MemoryStore: a bad record never gets in ---------------------------------

Deno.test("MemoryStore refuses to complete with headers it could not replay", async () => {
  const store = new MemoryStore();
  for (const [kind, headers] of Object.entries(BAD)) {
    const claim = await store.claim(`m-${kind}`, {
      fingerprint: "f",
      leaseMs: 30_000,
      ttlMs: 60_000,
    });
    assert.equal(claim.state, "acquired");
    if (claim.state !== "acquired") continue;
    await assert.rejects(
      () =>
        store.complete(`m-${kind}`, claim.token, {
          status: 200,
          headers,
          body: new Uint8Array(1),
        }),
      TypeError,
      kind,
    );
  }
});

Deno.test("a handler header with a control character is left out of the record; the live response keeps it", async () => {
  let runs = 0;
  const store = new MemoryStore();
  const guarded = idempotency(() => {
    runs++;
    return new Response("ok", {
      status: 201,
      headers: [["x-ctl", "a\u0001b"], ["x-fine", "1"]],
    });
  }, { scope: "global", store });
  const live = await guarded(post("ctl"));
  assert.equal(live.status, 201);
  assert.equal(live.headers.get("x-ctl"), "a\u0001b");
  assert.equal(await live.text(), "ok");
  const replay = await guarded(post("ctl"));
  assert.equal(replay.status, 201);
  assert.equal(replay.headers.get("x-ctl"), null);
  assert.equal(replay.headers.get("x-fine"), "1");
  assert.equal(await replay.text(), "ok");
  assert.equal(runs, 1);
});

// --- Deno KV -----------------------------------------------------------------

/** Replaces the headers of the inline KV record at `slot`. */
async function tamperKv(
  kv: Deno.Kv,
  prefix: Deno.KvKey,
  slot: string,
  headers: [string, string][],
): Promise<void> {
  const key = [...prefix, "rec", slot];
  const entry = await kv.get<Record<string, unknown>>(key);
  assert.ok(
    entry.value && Array.isArray(entry.value.headers),
    "an inline record",
  );
  await kv.set(key, { ...entry.value, headers });
}

Deno.test("KvStore: a record with headers that are not HTTP is in flight, and the middleware answers 500 unreadable", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const prefix = [uniquePrefix("kv_bad_headers")];
    const store = new KvStore({ kv, prefix });
    for (const kind of Object.keys(BAD)) {
      await throughMiddleware(
        store,
        kind,
        (slot, headers) => tamperKv(kv, prefix, slot, headers),
      );
    }
  } finally {
    kv.close();
  }
});

Deno.test("KvStore: a chunked record whose header bytes are damaged is in flight", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const prefix = [uniquePrefix("kv_bad_chunk")];
    const store = new KvStore({ kv, prefix });
    const body = new Uint8Array(200_000).fill(7); // over one value: chunked
    const encoder = new TextEncoder();
    // Same-length substitutions, so the chunk lengths still add up.
    for (
      const [from, to] of [
        ['"x-probe","fine"', '"x probe","fine"'],
        ['"x-probe","fine"', '"x-probe","\u20acf"'],
      ] as const
    ) {
      assert.equal(
        encoder.encode(from).byteLength,
        encoder.encode(to).byteLength,
      );
      const slot = `chunked-${crypto.randomUUID()}`;
      const claim = await store.claim(slot, {
        fingerprint: "f",
        leaseMs: 30_000,
        ttlMs: 60_000,
      });
      assert.ok(claim.state === "acquired");
      await store.complete(slot, claim.token, {
        status: 200,
        headers: [["content-type", "application/octet-stream"], PROBE],
        body,
      });
      let patched = 0;
      for await (const entry of kv.list<unknown>({ prefix })) {
        if (!(entry.value instanceof Uint8Array)) continue;
        const text = new TextDecoder("latin1").decode(entry.value);
        const at = text.indexOf(from);
        if (at < 0) continue;
        const bytes = entry.value.slice();
        bytes.set(encoder.encode(to), at);
        await kv.set(entry.key, bytes);
        patched++;
      }
      assert.equal(patched, 1, "the header text is in one chunk");
      const seen = await store.claim(slot, {
        fingerprint: "f",
        leaseMs: 30_000,
        ttlMs: 60_000,
      });
      assert.equal(seen.state, "in_flight", to);
      if (seen.state === "in_flight") assert.equal(seen.fingerprint, null);
    }
  } finally {
    kv.close();
  }
});

Deno.test("KvStore under Deno.serve: a replay of a header Deno.serve cannot write is a 500 unreadable, not a crash", async () => {
  const kv = await Deno.openKv(":memory:");
  const prefix = [uniquePrefix("kv_serve")];
  const { state, handler } = counted();
  const server = serveLocal(
    idempotency(handler, {
      scope: "global",
      store: new KvStore({ kv, prefix }),
    }),
  );
  try {
    const url = `${server.url}/payments`;
    const send = () => fetchPost(url, "wire");
    const first = await send();
    assert.equal(first.status, 201);
    await first.body?.cancel();
    // Before the check, this replay made Deno 2.9.6 abort the whole process.
    await tamperKv(
      kv,
      prefix,
      slotOf("", "wire"),
      tampered("a control character in a value"),
    );
    const retry = await send();
    assert.equal(retry.status, 500);
    assert.equal((await retry.json()).type, PROBLEM_TYPES.unreadable);
    assert.equal(state.runs, 1);
    assert.deepEqual(server.escaped, []);
  } finally {
    await server.shutdown();
    kv.close();
  }
});

// --- Redis -------------------------------------------------------------------

Deno.test({
  name: testName(
    "RedisStore: a record with headers that are not HTTP is in flight, and the middleware answers 500 unreadable",
    REDIS_IGNORE,
  ),
  ignore: REDIS_IGNORE !== false,
  async fn() {
    const prefix = `${uniquePrefix("bad_headers")}:`;
    const client = createClient({ url: REDIS_URL });
    client.on("error", () => {});
    await client.connect();
    try {
      const store = new RedisStore({ client, prefix });
      for (const kind of Object.keys(BAD)) {
        await throughMiddleware(store, kind, async (slot, headers) => {
          const key = prefix + slot;
          assert.equal(await redisRecordState(client, key), "c");
          await setRedisRecordHeaders(client, key, headers);
        });
      }
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
    }
  },
});

// --- PostgreSQL --------------------------------------------------------------

function pgTest(
  name: string,
  fn: (sql: postgres.Sql, table: string) => Promise<void>,
): void {
  Deno.test({
    name: testName(name, POSTGRES_IGNORE),
    ignore: POSTGRES_IGNORE !== false,
    async fn() {
      await using pg = await postgresSchema("bad_headers");
      await fn(pg.sql, `${pg.schema}.idempotency_keys`);
    },
  });
}

/** Replaces the headers of the row at `slot`. */
async function tamperPg(
  sql: postgres.Sql,
  table: string,
  slot: string,
  headers: [string, string][],
): Promise<void> {
  const [schema, name] = table.split(".");
  const rows = await sql.unsafe(
    `UPDATE "${schema}"."${name}" SET headers = $1::text::jsonb WHERE slot = $2 AND state = 'completed' RETURNING slot`,
    [JSON.stringify(headers), slot],
  );
  assert.equal(rows.length, 1);
}

pgTest(
  "PostgresStore: a record with headers that are not HTTP is in flight, and the middleware answers 500 unreadable",
  async (sql, table) => {
    const store = new PostgresStore({ sql, table });
    await store.migrate();
    for (const kind of BAD_IN_JSONB) {
      await throughMiddleware(
        store,
        kind,
        (slot, headers) => tamperPg(sql, table, slot, headers),
      );
    }
  },
);

// --- FailoverStore -----------------------------------------------------------

Deno.test({
  name: testName(
    "FailoverStore: a damaged record in either store is in flight, never a second run",
    REDIS_IGNORE || POSTGRES_IGNORE,
  ),
  ignore: (REDIS_IGNORE || POSTGRES_IGNORE) !== false,
  async fn() {
    const prefix = `${uniquePrefix("failover_bad_headers")}:`;
    const client = createClient({ url: REDIS_URL });
    client.on("error", () => {});
    await client.connect();
    const { sql, schema, drop } = await postgresSchema("failover_bad_headers");
    try {
      const table = `${schema}.idempotency_keys`;
      const fallback = new PostgresStore({ sql, table });
      await fallback.migrate();
      let primaryDown = false;
      const redis = new RedisStore({ client, prefix });
      // The primary as written, or failing, to put a record in the fallback.
      const primary: IdempotencyStore = {
        claim: (s, o) =>
          primaryDown ? Promise.reject(new Error("down")) : redis.claim(s, o),
        complete: (s, t, r) =>
          primaryDown
            ? Promise.reject(new Error("down"))
            : redis.complete(s, t, r),
        release: (s, t) =>
          primaryDown ? Promise.reject(new Error("down")) : redis.release(s, t),
        extend: (s, t, l) =>
          primaryDown
            ? Promise.reject(new Error("down"))
            : redis.extend(s, t, l),
      };
      const store = new FailoverStore({ primary, fallback });
      const kind = "CR LF in a value";
      // Damaged in both: in flight.
      await throughMiddleware(store, kind, async (slot, headers) => {
        await setRedisRecordHeaders(client, prefix + slot, headers);
        await tamperPg(sql, table, slot, headers);
      });
      // Damaged in the primary only: in flight, or the fallback's intact
      // copy replayed (a FailoverStore may consult it on a primary
      // in_flight); never a second run.
      await throughMiddleware(store, kind, async (slot, headers) => {
        await setRedisRecordHeaders(client, prefix + slot, headers);
      }, "conflict_or_replay");
      // Damaged in the fallback, written while the primary was down.
      primaryDown = true;
      await throughMiddleware(store, kind, async (slot, headers) => {
        await tamperPg(sql, table, slot, headers);
        primaryDown = false;
      });
    } finally {
      client.destroy();
      await deleteRedisKeys(prefix);
      await drop();
    }
  },
});
