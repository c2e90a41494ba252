// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The conformance suite run against a store of your own (here one that
 * keeps its records in a MemoryStore).
 *
 *     deno test examples/my_store_test.ts
 *
 * @module
 */
import { MemoryStore } from "@idempotent/http";
import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  WriteOutcome,
} from "@idempotent/http/store";

/** Your store: here, a MemoryStore behind the four methods of the contract. */
class MyStore implements IdempotencyStore {
  #records = new MemoryStore();
  claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    return this.#records.claim(slot, options);
  }
  complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    return this.#records.complete(slot, token, response);
  }
  release(slot: string, token: string): Promise<WriteOutcome> {
    return this.#records.release(slot, token);
  }
  extend(slot: string, token: string, leaseMs: number): Promise<WriteOutcome> {
    return this.#records.extend(slot, token, leaseMs);
  }
}

const sleep = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));

import { storeConformance } from "@idempotent/http/testing";

storeConformance({
  name: "MyStore",
  setup: () => Promise.resolve({ store: new MyStore(), elapse: sleep }),
});
