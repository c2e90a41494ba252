// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * An unreadable record answers as what it is (issue 29, item 8): the 500
 * `unreadable` problem, no `Retry-After`, the handler never run, on a
 * MemoryStore (sealed under a key no longer listed), real Redis (a foreign
 * string without a TTL under the test's own prefix, which stays for ever and
 * is logged with the `idem forget` command that frees it, run here as the
 * operator would), real PostgreSQL (a damaged row in the test's own table)
 * and a Deno KV file; a key merely in flight still answers 409 with
 * `Retry-After`. docs/architecture.md, Unreadable is in flight.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  idempotency,
  type IdempotencyEvent,
  type IdempotencyStore,
  MemoryStore,
  PROBLEM_TYPES,
  slotOf,
} from "../mod.ts";
import { KvStore } from "../src/stores/kv.ts";
import { RedisStore } from "../src/stores/redis.ts";
import { post } from "./_support/http.ts";
import { UnreadableStore } from "./_support/stores.ts";
import { redisTest } from "./_support/redis.ts";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresStore,
  REDIS_URL,
} from "./_support/services.ts";

const CLI = new URL("../src/cli/cli.ts", import.meta.url).pathname;

/** A guarded handler on `store` that counts its runs, with its events and log lines. */
function guarded(store: IdempotencyStore, extra: object = {}) {
  const seen = {
    runs: 0,
    events: [] as IdempotencyEvent[],
    lines: [] as string[],
  };
  const line = (text: string) => void seen.lines.push(text);
  const handler = idempotency(() => {
    seen.runs++;
    return new Response("charged", { status: 201 });
  }, {
    scope: "global",
    store,
    onEvent: (event) => void seen.events.push(event),
    logger: { warn: line, error: line },
    ...extra,
  });
  return { handler, seen };
}

/** Asserts that `key` answers the unreadable problem, twice, and never runs the handler. */
async function assertUnreadable(
  { handler, seen }: ReturnType<typeof guarded>,
  key: string,
  expiresAt: "number" | "null",
): Promise<void> {
  const runs = seen.runs;
  seen.events.length = 0;
  for (let i = 0; i < 2; i++) {
    const res = await handler(post(key));
    assert.equal(res.status, 500, key);
    assert.equal(res.headers.get("retry-after"), null, key);
    assert.equal(res.headers.get("cache-control"), "no-store", key);
    const problem = await res.json();
    assert.equal(problem.type, PROBLEM_TYPES.unreadable);
    assert.equal(problem.status, 500);
    assert.match(problem.detail, /cannot be read/);
    assert.match(
      problem.detail,
      /an operator restores the key it was sealed under, or forgets the record/,
    );
    assert.doesNotMatch(problem.detail, /being processed/);
  }
  assert.equal(seen.runs, runs, "the handler never runs");
  const slot = slotOf("", key);
  assert.equal(seen.events.length, 2);
  for (const event of seen.events) {
    assert.equal(event.type, "conflict");
    if (event.type !== "conflict") continue;
    assert.equal(event.unreadable, true);
    assert.equal(event.slot, slot);
    if (expiresAt === "null") assert.equal(event.expiresAt, null);
    else {assert.ok(
        typeof event.expiresAt === "number" && event.expiresAt > Date.now(),
      );}
  }
  // One line for both: the second is held back (one a minute per kind).
  const lines = seen.lines.filter((l) => l.includes("unreadable:"));
  assert.equal(lines.length, 1, seen.lines.join("\n"));
  assert.ok(lines[0]!.includes(`idem forget STORE --slot ${slot} --yes`));
  assert.match(
    lines[0]!,
    expiresAt === "null"
      ? /may stay for ever/
      : /stays until it expires at \d{4}-/,
  );
  seen.lines.length = 0;
}

Deno.test("MemoryStore: a record sealed under a key no longer listed answers 500 unreadable, its expiry logged; a key in flight still answers 409 with Retry-After", async () => {
  const store = new MemoryStore();
  const aes = { name: "AES-GCM", length: 256 };
  const key = async () =>
    await crypto.subtle.generateKey(aes, false, ["encrypt", "decrypt"]);
  const first = guarded(store, {
    encryption: { keys: [{ id: "k1", key: await key() }] },
  });
  assert.equal((await first.handler(post("sealed"))).status, 201);
  const rotated = guarded(store, {
    encryption: { keys: [{ id: "k2", key: await key() }] },
  });
  rotated.seen.lines.length = 0;
  await assertUnreadable(rotated, "sealed", "number");
  assert.equal(first.seen.runs, 1);
  // Its fix is the key, listed again: forgetting it would charge again.
  const fresh = guarded(store, {
    encryption: { keys: [{ id: "k2", key: await key() }] },
  });
  await (await fresh.handler(post("sealed"))).body?.cancel();
  const [told] = fresh.seen.lines.filter((l) => l.includes("unreadable:"));
  assert.match(
    told!,
    /not among the keys given; list key id "k1" in 'encryption\.keys' again \(after the sealing key\) and it replays: forgetting it would run its handler again; /,
  );

  // A key in flight is not unreadable: 409, Retry-After, no log line.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  const slow = idempotency(async () => {
    await gate;
    return new Response("done", { status: 201 });
  }, { scope: "global", store: new MemoryStore(), logger: false });
  const holder = slow(post("held"));
  const duplicate = await slow(post("held"));
  assert.equal(duplicate.status, 409);
  assert.ok(Number(duplicate.headers.get("retry-after")) >= 1);
  assert.equal((await duplicate.json()).type, PROBLEM_TYPES.inFlight);
  release();
  await (await holder).text();
});

redisTest(
  "RedisStore: a foreign string without a TTL answers 500 unreadable, is logged as staying for ever with its idem forget command, and that command frees the key",
  "unreadable_forever",
  async (client, prefix) => {
    const store = new RedisStore({ client, prefix });
    const slot = slotOf("", "foreign");
    await client.set(prefix + slot, "written by another program");
    assert.equal(await client.pTTL(prefix + slot), -1);
    const app = guarded(store);
    await assertUnreadable(app, "foreign", "null");
    assert.equal(await client.get(prefix + slot), "written by another program");

    // The command the line names, with this store's flags, as an operator runs it.
    const forget = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        CLI,
        "forget",
        "--redis",
        REDIS_URL,
        "--prefix",
        prefix,
        "--slot",
        slot,
        "--yes",
      ],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(forget.code, 0, new TextDecoder().decode(forget.stderr));
    const res = await app.handler(post("foreign"));
    assert.equal(res.status, 201);
    assert.equal(await res.text(), "charged");
    assert.equal(app.seen.runs, 1);
  },
);

integrationTest(
  "PostgresStore: a damaged row in the test's own table answers 500 unreadable, its expiry logged",
  POSTGRES_IGNORE,
  async () => {
    await using pg = await postgresStore("unreadable_row");
    const app = guarded(pg.store);
    assert.equal((await app.handler(post("paid"))).status, 201);
    await pg.sql.unsafe(
      `UPDATE ${pg.store.table} SET version = 999 WHERE slot = $1`,
      [slotOf("", "paid")],
    );
    await assertUnreadable(app, "paid", "number");
    assert.equal(app.seen.runs, 1);
  },
);

Deno.test("KvStore: a foreign value in a KV file answers 500 unreadable; the store reports no expiry for it", async () => {
  const path = await Deno.makeTempFile({ suffix: ".kv" });
  try {
    using kv = await Deno.openKv(path);
    await kv.set(
      ["idempotency", "rec", slotOf("", "poisoned")],
      "not a record",
    );
    await assertUnreadable(guarded(new KvStore({ kv })), "poisoned", "null");
  } finally {
    await Deno.remove(path).catch(() => {});
  }
});

Deno.test("property: whatever the store's hint, an unreadable claim is 500 without Retry-After and a readable one in flight is 409 with one", async () => {
  const store = new UnreadableStore({ held: true, retryAfterMs: 1 });
  const { handler, seen } = guarded(store, { logger: false });
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 86_400_000 }),
      fc.boolean(),
      async (ms, unreadable) => {
        Object.assign(store, { retryAfterMs: ms, unreadable });
        const res = await handler(post("k"));
        await res.body?.cancel();
        assert.equal(res.status, unreadable ? 500 : 409);
        assert.equal(res.headers.has("retry-after"), !unreadable);
      },
    ),
    { numRuns: 200 },
  );
  assert.equal(seen.runs, 0);
});
