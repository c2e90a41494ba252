// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore's deadline: a Deno KV call that does not answer ends in a
 * StoreError after `timeoutMs`, and a claim that acquires the slot after its
 * caller got that error is released again (rule 10).
 */
import assert from "node:assert/strict";
import { KvStore } from "../../src/stores/kv.ts";
import { StoreError } from "../../src/store.ts";

/**
 * A real in-memory Deno KV whose reads wait at a gate while it is closed:
 * what a Deno Deploy region that stops answering looks like to the store.
 */
function gatedKv(kv: Deno.Kv) {
  let open: Promise<void> = Promise.resolve();
  let release = () => {};
  let commits = 0;
  const gated = new Proxy(kv, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if (name === "atomic") {
        return () => {
          const op = target.atomic();
          const commit = op.commit.bind(op);
          op.commit = async () => {
            const result = await commit();
            if (result.ok) commits++;
            return result;
          };
          return op;
        };
      }
      if (name !== "get" || typeof value !== "function") {
        return typeof value === "function" ? value.bind(target) : value;
      }
      return async (...args: unknown[]) => {
        await open;
        return await (value as (...a: unknown[]) => unknown).apply(
          target,
          args,
        );
      };
    },
  });
  return {
    kv: gated,
    /** Commits that succeeded through this handle. */
    get commits() {
      return commits;
    },
    close() {
      open = new Promise((resolve) => release = resolve);
    },
    open() {
      release();
      open = Promise.resolve();
    },
  };
}

const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 60_000 };

Deno.test("KvStore gives up after timeoutMs with a StoreError, and undoes a claim that lands after it", async () => {
  using kv = await Deno.openKv(":memory:");
  const gate = gatedKv(kv);
  const store = new KvStore({ kv: gate.kv, timeoutMs: 50 });
  gate.close();
  const outcome = await Promise.race([
    store.claim("slot", options).then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    ),
    new Promise((resolve) => setTimeout(resolve, 5_000, { hung: true })),
  ]);
  assert.ok(
    "error" in (outcome as object),
    `the claim must fail by its deadline: ${JSON.stringify(outcome)}`,
  );
  const error = (outcome as { error: unknown }).error;
  assert.ok(error instanceof StoreError);
  assert.equal(error.operation, "claim");
  assert.match(error.message, /did not answer within 50 ms/);

  // KV answers again: the claim goes on and acquires the slot; the store
  // then releases it, so the record appears and is deleted again.
  gate.open();
  const key = ["idempotency", "rec", "slot"];
  while (gate.commits === 0) await tick(); // the late claim committed
  while ((await kv.get(key)).versionstamp !== null) await tick();
  const next = await new KvStore({ kv }).claim("slot", options);
  assert.equal(next.state, "acquired");
  assert.equal(next.state === "acquired" && next.recovered, false);
});

function tick(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5));
}

Deno.test("KvStore validates timeoutMs", async () => {
  using kv = await Deno.openKv(":memory:");
  assert.throws(() => new KvStore({ kv, timeoutMs: 0 }), RangeError);
  assert.throws(() => new KvStore({ kv, timeoutMs: Number.NaN }), RangeError);
  const store = new KvStore({ kv, timeoutMs: Infinity });
  assert.equal((await store.claim("s", options)).state, "acquired");
});

Deno.test("KvStore gives an operation 10,000 ms by default", async () => {
  using kv = await Deno.openKv(":memory:");
  const gate = gatedKv(kv);
  const store = new KvStore({ kv: gate.kv });
  const timers: number[] = [];
  const real = globalThis.setTimeout;
  globalThis.setTimeout = ((_fn: () => void, ms = 0) => {
    timers.push(ms);
    return { ref() {}, unref() {} };
  }) as unknown as typeof setTimeout;
  try {
    gate.close();
    const claim = store.claim("s", options);
    assert.deepEqual(timers, [10_000]);
    gate.open();
    assert.equal((await claim).state, "acquired");
  } finally {
    globalThis.setTimeout = real;
  }
});
