// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Fills a MemoryStore and prints, as JSON, the memory it holds after GC:
 * run by `tests/stores/memory_bound_test.ts` in its own process, as
 *
 *     deno run --v8-flags=--expose-gc,--single-threaded-gc tests/_support/memory_bound.ts CASE
 *
 * `held` is the growth of `heapUsed + external` from a baseline taken in
 * this process before the fill, once the code paths have run (warm-up).
 * Single-threaded GC makes the reading exact: nothing is still being swept.
 *
 * @module
 */
import { idempotency } from "../../src/idempotency.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import type { StoredResponse } from "../../src/store.ts";
import { sha256Hex } from "../../src/_sha256.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");

function used(): number {
  for (let i = 0; i < 3; i++) gc!();
  const { heapUsed, external } = Deno.memoryUsage();
  return heapUsed + external;
}

const MiB = 1_048_576;

function print(reading: { held: number; entries: number; counted: number }) {
  Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify(reading)));
}
const options = (fingerprint: string) => ({
  fingerprint,
  leaseMs: 60_000,
  ttlMs: 86_400_000,
});
/** A fresh slot or fingerprint, made as the middleware makes them. */
let serial = 0;
const hex = (tag: number) => sha256Hex(`${tag}`, `${++serial}`);

async function complete(
  store: MemoryStore,
  response: StoredResponse,
): Promise<void> {
  const slot = hex(1);
  const claim = await store.claim(slot, options(hex(2)));
  if (claim.state !== "acquired") throw new Error(`not acquired: ${slot}`);
  await store.complete(slot, claim.token, response);
}

/** 1 MiB bodies, each an array of its own. */
async function large(store: MemoryStore, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await complete(store, {
      status: 200,
      headers: [["content-type", "application/octet-stream"]],
      body: new Uint8Array(MiB).fill(i),
    });
  }
}

/** 64 KiB bodies, each a view into a 1 MiB buffer that nothing else holds. */
async function views(store: MemoryStore, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await complete(store, {
      status: 200,
      headers: [["content-type", "application/octet-stream"]],
      body: new Uint8Array(MiB).subarray(4_096, 4_096 + 65_536),
    });
  }
}

/** Small JSON bodies with one header, as an API answers. */
async function tiny(store: MemoryStore, count: number): Promise<void> {
  const encoder = new TextEncoder();
  for (let i = 0; i < count; i++) {
    await complete(store, {
      status: 201,
      headers: [["content-type", "application/json"]],
      body: encoder.encode(`{"id":${i},"ok":true}`),
    });
  }
}

/** Each record its own header list, as a handler that sets a cookie makes. */
async function cookies(store: MemoryStore, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await complete(store, {
      status: 201,
      headers: [
        ["content-type", "application/json"],
        ["set-cookie", `session=${hex(3)}; Path=/; HttpOnly`],
      ],
      body: null,
      omitted: "too_large",
    });
  }
}

/** Live claims only. */
async function claims(store: MemoryStore, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const claim = await store.claim(hex(1), options(hex(2)));
    if (claim.state !== "acquired") throw new Error("not acquired");
  }
}

type Case = {
  store: () => MemoryStore;
  fill: (store: MemoryStore, count: number) => Promise<void>;
  count: number;
};

const cases: Record<string, Case> = {
  large: {
    store: () => new MemoryStore({ maxBytes: 8 * MiB }),
    fill: large,
    count: 300,
  },
  views: { store: () => new MemoryStore(), fill: views, count: 300 },
  tiny: {
    // 5,000 past the cap: the store is full and evicting.
    store: () => new MemoryStore({ maxEntries: 20_000 }),
    fill: tiny,
    count: 25_000,
  },
  cookies: {
    store: () => new MemoryStore({ maxEntries: 20_000 }),
    fill: cookies,
    count: 20_000,
  },
  claims: {
    store: () => new MemoryStore({ maxEntries: 20_000 }),
    fill: claims,
    count: 20_000,
  },
};

const name = Deno.args[0] ?? "";
if (name === "http") {
  // The middleware with its defaults (a MemoryStore of 64 MiB), answering
  // 1,000,000-byte bodies (under the default 1 MiB capture cap).
  const app = (count: number) => {
    const handler = idempotency(
      () =>
        new Response(new Uint8Array(1_000_000).fill(7), {
          headers: { "content-type": "application/octet-stream" },
        }),
      { scope: "global" },
    );
    return async () => {
      for (let i = 0; i < count; i++) {
        const response = await handler(
          new Request("http://app.test/orders", {
            method: "POST",
            headers: { "idempotency-key": `key-${++serial}` },
            body: "{}",
          }),
        );
        if (response.status !== 200) throw new Error(`${response.status}`);
        await response.arrayBuffer();
      }
    };
  };
  await app(10)(); // warm-up, then dropped
  const before = used();
  const run = app(150);
  await run();
  const held = used() - before;
  print({ held, entries: 150, counted: 0 });
  // Keep the app, and so its store, alive until after the reading.
  if (run.length > 0) throw new Error("unreachable");
} else {
  const chosen = cases[name];
  if (chosen === undefined) throw new Error(`unknown case: ${name}`);
  await chosen.fill(chosen.store(), 20); // warm-up, then dropped
  const before = used();
  const store = chosen.store();
  await chosen.fill(store, chosen.count);
  const held = used() - before;
  print({ held, entries: store.size, counted: store.bytes });
}
