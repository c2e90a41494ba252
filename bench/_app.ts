// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The app the request-path benchmarks measure: a small JSON payments
 * handler that reads its body and answers 201.
 *
 * @module
 */

import type { IdempotencyStore, StoredResponse } from "../src/store.ts";

/** The claim options of the store benchmarks. */
export const claimOptions = {
  fingerprint: "f".repeat(64),
  leaseMs: 30_000,
  ttlMs: 60_000,
};

/** The record the store benchmarks complete with. */
export const record: StoredResponse = {
  status: 201,
  headers: [["content-type", "application/json"]],
  body: new TextEncoder().encode('{"id":"pay_1","status":"succeeded"}'),
};

/**
 * What a request with a new key costs a store: claim, then complete.
 *
 * @param store The store.
 * @param slot A slot not used before.
 */
export async function freshKey(
  store: IdempotencyStore,
  slot: string,
): Promise<void> {
  const claim = await store.claim(slot, claimOptions);
  if (claim.state === "acquired") {
    await store.complete(slot, claim.token, record);
  }
}

/** The request body the benchmarks send. */
export const payload: string = JSON.stringify({
  amount: 1999,
  currency: "eur",
  customer: "cus_8fQ2",
  note: "x".repeat(64),
});

const answer = JSON.stringify({
  id: "pay_1",
  status: "succeeded",
  amount: 1999,
});

/**
 * Reads the request body and answers 201 with a small JSON body.
 *
 * @param req The request.
 * @returns The response.
 */
export async function handler(req: Request): Promise<Response> {
  await req.arrayBuffer();
  return new Response(answer, {
    status: 201,
    headers: { "content-type": "application/json" },
  });
}
