// Copyright 2026 the @idempotent/http authors. MIT license.
/** Sealed records under a rotated key list, for the inspect and CLI tests. @module */

import { idempotency, importEncryptionKeys } from "../../mod.ts";
import { inspectKey } from "../../src/inspect.ts";
import type { IdempotencyStore } from "../../src/store.ts";
import { post } from "./http.ts";

const raw = (byte: number) =>
  btoa(String.fromCharCode(...new Uint8Array(32).fill(byte)));
/** The key list before the deploy (k1 seals), after it (k2, k1 kept), and k1 dropped. */
export const KEY_LISTS = {
  before: `k1:${raw(1)}`,
  rotated: `k2:${raw(2)},k1:${raw(1)}`,
  dropped: `k2:${raw(2)}`,
};
export const BEFORE = await importEncryptionKeys(KEY_LISTS.before);
export const ROTATED = await importEncryptionKeys(KEY_LISTS.rotated);
export const DROPPED = await importEncryptionKeys(KEY_LISTS.dropped);

/** Three records sealed under k1, one under k2, one in clear, one in flight. */
export async function plantSealed(store: IdempotencyStore): Promise<void> {
  const handler = (encryption?: typeof BEFORE) =>
    idempotency(
      () =>
        new Response('{"id":"pay_1"}', {
          status: 201,
          headers: { "content-type": "application/json", "x-order": "o1" },
        }),
      { scope: () => "acct", store, ...(encryption ? { encryption } : {}) },
    );
  for (const key of ["a", "b", "c"]) {
    await (await handler(BEFORE)(post(key))).text();
  }
  await (await handler(ROTATED)(post("d"))).text();
  await (await handler()(post("clear"))).text();
  const slot = (await inspectKey(store, { scope: "acct", key: "flight" })).slot;
  await store.claim(slot, { fingerprint: "f", leaseMs: 60_000, ttlMs: 60_000 });
}
