// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the sealed-record tests share (`idempotency_sealing_test.ts`,
 * `idempotency_sealing_edges_test.ts`): AES keys, the handler's body and
 * header values worth hiding, a middleware over a store with and without
 * `encryption`, a response's snapshot, and the unreadable answer's check.
 *
 * @module
 */
import assert from "node:assert/strict";
import { idempotency } from "../mod.ts";
import type { IdempotencyEvent } from "../src/events.ts";
import type { IdempotencyOptions } from "../src/options.ts";
import type {
  IdempotencyStore,
  StoredResponse,
  WriteOutcome,
} from "../src/store.ts";
import { post } from "./_support/http.ts";
import { StoreWrapper } from "./_support/stores.ts";

/** The keys of the `encryption` option. */
export type Keys = NonNullable<IdempotencyOptions["encryption"]>["keys"];

/** A fresh, unextractable AES-GCM key. */
export function aesKey(
  length = 256,
  usages: KeyUsage[] = ["encrypt", "decrypt"],
): Promise<CryptoKey> {
  return crypto.subtle.generateKey(
    { name: "AES-GCM", length },
    false,
    usages,
  ) as Promise<CryptoKey>;
}

/** The older of two listed keys, and the newer one that seals. */
export const OLD = { id: "2026-01", key: await aesKey() };
export const NEW = { id: "2026-02", key: await aesKey() };

/** The handler's answer: a body and header values worth hiding. */
export const BODY = JSON.stringify({
  name: "Ada Lovelace",
  card: "fingerprint-9f8e7d6c5b4a3210",
  address: "12 Analytical Engine Row, London",
});
export const HEADERS: [string, string][] = [
  ["content-type", "application/json; charset=utf-8"],
  ["etag", '"order-v1-5b4a3210fedcba98"'],
  ["location", "/orders/ord_7f3e2d1c0b9a8877"],
  ["x-customer", "cus_Lovelace_1815_12_10"],
];

/** Records what MemoryStore is given to hold: there is no service to dump. */
export class Held extends StoreWrapper {
  held: StoredResponse[] = [];
  protected around<T>(
    _: string,
    __: string,
    run: () => Promise<T>,
  ): Promise<T> {
    return run();
  }
  override complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    this.held.push(response);
    return super.complete(slot, token, response);
  }
}

/** A middleware over `store` that seals under `keys`, see {@linkcode instance}. */
export function sealed(
  keys: Keys,
  store: IdempotencyStore,
  events: string[] = [],
): Instance {
  return instance(store, events, { encryption: { keys } });
}

/** A guarded handler and how many times it ran. */
export interface Instance {
  handler: ReturnType<typeof idempotency>;
  runs: () => number;
}

/**
 * A middleware over `store` answering 201 with {@linkcode BODY} and
 * {@linkcode HEADERS}; each conflict is pushed to `events` as
 * `conflict:<unreadable>`.
 */
export function instance(
  store: IdempotencyStore,
  events: string[],
  extra: Partial<IdempotencyOptions> = {},
): Instance {
  let runs = 0;
  const handler = idempotency(() => {
    runs++;
    return new Response(BODY, { status: 201, headers: HEADERS });
  }, {
    scope: "global",
    store,
    maxResponseBytes: 4096,
    onEvent: (event: IdempotencyEvent) => {
      if (event.type === "conflict") {
        events.push(`conflict:${event.unreadable}`);
      }
    },
    ...extra,
  });
  return { handler, runs: () => runs };
}

/** What a client sees of a response: status, headers (the replay mark left out), body. */
export async function snapshot(response: Response): Promise<{
  status: number;
  headers: [string, string][];
  body: Uint8Array;
}> {
  return {
    status: response.status,
    headers: [...response.headers].filter(([n]) => n !== "idempotent-replayed"),
    body: new Uint8Array(await response.arrayBuffer()),
  };
}

/** Asserts that `key` answers 500 without Retry-After, one unreadable conflict seen. */
export async function assertUnreadable(
  handler: (r: Request) => Response | Promise<Response>,
  key: string,
  events: string[],
): Promise<void> {
  events.length = 0;
  const answer = await handler(post(key));
  assert.equal(answer.status, 500, key);
  assert.equal(answer.headers.get("retry-after"), null, key);
  await answer.body?.cancel();
  assert.deepEqual(events, ["conflict:true"], key);
}
