// Copyright 2026 the @idempotent/http authors. MIT license.
/** Stores in tests: wrappers that count or record calls, and waiters. @module */

import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  StoreOperation,
  WriteOutcome,
} from "../../src/store.ts";
import type { IdempotencyEvent } from "../../src/events.ts";
import assert from "node:assert/strict";
import { idempotency } from "../../mod.ts";
import { MemoryStore } from "../../src/stores/memory.ts";
import { post } from "./http.ts";
import { deferred, waitFor } from "./time.ts";

/** Zero calls of every store operation, for wrappers that count them. */
export function callCounts(): Record<StoreOperation, number> {
  return { claim: 0, complete: 0, release: 0, extend: 0 };
}

/**
 * A store that sends every call of a real store through one method,
 * {@linkcode StoreWrapper.around}: the base of the tests' fault injectors,
 * counters and switches, so none of them spells out the four operations.
 */
export abstract class StoreWrapper implements IdempotencyStore {
  /**
   * @param inner The real store.
   */
  constructor(readonly inner: IdempotencyStore) {}

  /**
   * Runs one call: `run` sends it to the real store.
   *
   * @param operation Which operation.
   * @param slot The slot it is for.
   * @param run Sends it to the real store.
   */
  protected abstract around<T>(
    operation: StoreOperation,
    slot: string,
    run: () => Promise<T>,
  ): Promise<T>;

  /** {@inheritDoc IdempotencyStore.claim} */
  claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    return this.around("claim", slot, () => this.inner.claim(slot, options));
  }
  /** {@inheritDoc IdempotencyStore.complete} */
  complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    return this.around(
      "complete",
      slot,
      () => this.inner.complete(slot, token, response),
    );
  }
  /** {@inheritDoc IdempotencyStore.release} */
  release(slot: string, token: string): Promise<WriteOutcome> {
    return this.around("release", slot, () => this.inner.release(slot, token));
  }
  /** {@inheritDoc IdempotencyStore.extend} */
  extend(slot: string, token: string, leaseMs: number): Promise<WriteOutcome> {
    return this.around(
      "extend",
      slot,
      () => this.inner.extend(slot, token, leaseMs),
    );
  }
}

/** Collects events by type. */
export function recorder(): {
  events: IdempotencyEvent[];
  onEvent: (event: IdempotencyEvent) => void;
  types: () => string[];
} {
  const events: IdempotencyEvent[] = [];
  return {
    events,
    onEvent: (event) => events.push(event),
    types: () => events.map((e) => e.type),
  };
}

/**
 * Two middleware instances, one over `ownerStore` and one over `waiterStore`
 * (two handles on the same data): the first request runs and holds; its
 * duplicate on the other instance, once it waits in
 * `waiterStore.waitForChange()` (`watching` names that wait), is woken by the
 * first response and replays it, the handler having run once. Returns the
 * waiting instance's events.
 */
export async function assertWaiterWoken(
  ownerStore: IdempotencyStore,
  waiterStore: IdempotencyStore,
  watching: string,
): Promise<ReturnType<typeof recorder>> {
  const gate = deferred<Response>();
  let runs = 0;
  const handler = async (req: Request) => {
    await req.arrayBuffer();
    runs++;
    return await gate.promise;
  };
  const owner = idempotency(handler, { scope: "global", store: ownerStore });
  let watches = 0;
  const watch = waiterStore.waitForChange!.bind(waiterStore);
  Object.defineProperty(waiterStore, "waitForChange", {
    value: (slot: string, signal: AbortSignal) => {
      watches++;
      return watch(slot, signal);
    },
  });
  const log = recorder();
  const other = idempotency(handler, {
    scope: "global",
    store: waiterStore,
    waitForInFlight: 60_000,
    onEvent: log.onEvent,
  });
  const first = owner(post("k"));
  await waitFor("the first run", () => runs === 1);
  const waiting = other(post("k"));
  await waitFor(watching, () => watches >= 1);
  gate.resolve(new Response("paid", { status: 201 }));
  assert.equal(await (await first).text(), "paid");
  const res = await waiting;
  assert.equal(res.headers.get("idempotent-replayed"), "true");
  assert.equal(await res.text(), "paid");
  assert.equal(runs, 1);
  return log;
}

/**
 * A middleware over `store` (lease 30 s) whose handler counts its runs and
 * answers 201, warmed by one request (key `warm`) before the test's fault.
 */
export async function warmCountingHandler(store: IdempotencyStore): Promise<{
  handler: (request: Request) => Response | Promise<Response>;
  runs: () => number;
}> {
  let runs = 0;
  const handler = idempotency(() => {
    runs++;
    return new Response("charged", { status: 201 });
  }, { scope: "global", store, lease: 30_000 });
  const warm = await handler(post("warm"));
  assert.equal(warm.status, 201);
  await warm.body?.cancel();
  return { handler, runs: () => runs };
}

/** Sends `key` until the handler runs it (201): its slot is free again. */
export async function untilRunsAgain(
  handler: (request: Request) => Response | Promise<Response>,
  key: string,
): Promise<void> {
  await waitFor("the key to run again", async () => {
    const response = await handler(post(key));
    await response.body?.cancel();
    return response.status === 201;
  });
}

/**
 * A MemoryStore whose claims find what the middleware cannot read: while
 * `unreadable`, every claim finds a value in flight with no fingerprint
 * (unreadable) for `retryAfterMs`. Otherwise, with `held`, every claim finds
 * the request's own claim in flight for `retryAfterMs`; without, claims are
 * the MemoryStore's own. The fields may be changed between requests.
 */
export class UnreadableStore extends MemoryStore {
  /** Whether claims find an unreadable value. */
  unreadable: boolean;
  /** Whether a readable claim finds the request's own claim in flight. */
  held: boolean;
  /** The in-flight answer's hint. */
  retryAfterMs: number;

  /**
   * @param options The fields' first values: unreadable, not held, 2,500 ms.
   */
  constructor(
    options: { unreadable?: boolean; held?: boolean; retryAfterMs?: number } =
      {},
  ) {
    super();
    this.unreadable = options.unreadable ?? true;
    this.held = options.held ?? false;
    this.retryAfterMs = options.retryAfterMs ?? 2_500;
  }

  override claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    if (!this.unreadable && !this.held) return super.claim(slot, options);
    const fingerprint = this.unreadable ? null : options.fingerprint;
    const { retryAfterMs } = this;
    return Promise.resolve({ state: "in_flight", fingerprint, retryAfterMs });
  }
}
