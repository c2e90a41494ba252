// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore costs: a fresh key (claim, then complete) and a replay (a claim
 * that finds the completed record), on an in-memory database and on a file,
 * with a small body and a 256 KiB one (chunked: four values and a flip).
 *
 * Run with `deno bench --unstable-kv --allow-read --allow-write bench/kv_bench.ts`.
 *
 * @module
 */

import { KvStore } from "../src/stores/kv.ts";
import type { StoredResponse } from "../src/store.ts";

const options = { fingerprint: "f", leaseMs: 30_000, ttlMs: 3_600_000 };
const bodies = {
  "small": new TextEncoder().encode('{"id":"pay_123","status":"succeeded"}'),
  "256 KiB": new Uint8Array(262_144).map((_, i) => (i * 7919) & 0xff),
} as const;

const path = Deno.makeTempFileSync({ suffix: ".kv" });
const databases = {
  ":memory:": await Deno.openKv(":memory:"),
  "file": await Deno.openKv(path),
} as const;
globalThis.addEventListener("unload", () => {
  for (const kv of Object.values(databases)) kv.close();
  for (const suffix of ["", "-wal", "-shm", "-journal"]) {
    try {
      Deno.removeSync(path + suffix);
    } catch {
      // Not there.
    }
  }
});

let n = 0;
for (const [where, kv] of Object.entries(databases)) {
  const store = new KvStore({ kv, prefix: ["bench", crypto.randomUUID()] });
  for (const [size, body] of Object.entries(bodies)) {
    const response: StoredResponse = {
      status: 200,
      headers: [["content-type", "application/json"]],
      body,
    };
    const baseline = where === ":memory:" && size === "small";

    Deno.bench({
      name: `fresh key (claim + complete), ${where}, ${size} body`,
      group: "fresh key",
      baseline,
      async fn() {
        const slot = `fresh-${++n}`;
        const claim = await store.claim(slot, options);
        if (claim.state !== "acquired") throw new Error(claim.state);
        const done = await store.complete(slot, claim.token, response);
        if (done !== "applied") throw new Error(done);
      },
    });

    const replayed = `replay-${size}`;
    const claim = await store.claim(replayed, options);
    if (claim.state !== "acquired") throw new Error(claim.state);
    await store.complete(replayed, claim.token, response);
    Deno.bench({
      name: `replay (claim), ${where}, ${size} body`,
      group: "replay",
      baseline,
      async fn() {
        const seen = await store.claim(replayed, options);
        if (seen.state !== "completed") throw new Error(seen.state);
      },
    });
  }
}
