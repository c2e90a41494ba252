// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the MemoryStore tests share (`memory_test.ts`, `memory_model_test.ts`):
 * the claim options and a completed record of `n` body bytes.
 *
 * @module
 */

import type { StoredResponse } from "../../src/store.ts";

/** A claim's fingerprint, a lease of 1 s and a TTL of 10 s. */
export const options = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 10_000 };

/** A 200 with no headers and a body of `n` zero bytes. */
export const record = (n: number): StoredResponse => ({
  status: 200,
  headers: [],
  body: new Uint8Array(n),
});
