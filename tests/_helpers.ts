// Copyright 2026 the @idempotent/http authors. MIT license.
/** Shared helpers of the middleware tests. @module */

import type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  StoreOperation,
  WriteOutcome,
} from "../src/store.ts";
import type { IdempotencyEvent } from "../src/events.ts";
import type { Clock } from "../src/_async.ts";
import assert from "node:assert/strict";
import { idempotency } from "../mod.ts";

/** A POST with an idempotency key (unless `key` is null) and a body. */
export function post(
  key: string | null,
  body: string | Uint8Array<ArrayBuffer> = "{}",
  init: { path?: string; headers?: Record<string, string>; method?: string } =
    {},
): Request {
  const headers = new Headers(init.headers);
  if (key !== null) headers.set("idempotency-key", key);
  return new Request(`http://api.test${init.path ?? "/payments"}`, {
    method: init.method ?? "POST",
    headers,
    body,
  });
}

/** Deterministic bytes. */
export function pattern(length: number, seed = 1): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let x = seed * 2654435761 >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Whether two byte arrays are equal. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A body stream of the given frames, pulled one at a time, that may error after some of them. */
export function frames(
  parts: Uint8Array<ArrayBuffer>[],
  options: {
    errorAfter?: number;
    error?: unknown;
    onCancel?: (reason: unknown) => void;
    gate?: Promise<void>;
  } = {},
): ReadableStream<Uint8Array<ArrayBuffer>> {
  let i = 0;
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    async pull(controller) {
      if (i === 0 && options.gate) await options.gate;
      if (options.errorAfter !== undefined && i === options.errorAfter) {
        controller.error(options.error ?? new Error("body failed"));
        return;
      }
      const part = parts[i++];
      if (part === undefined) controller.close();
      else controller.enqueue(part);
    },
    cancel(reason) {
      options.onCancel?.(reason);
    },
  }, { highWaterMark: 0 });
}

/** Reads a response body to the end. */
export async function bytesOf(response: Response): Promise<Uint8Array> {
  return new Uint8Array(await response.arrayBuffer());
}

/** A promise and its resolver. */
export function deferred<T = void>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
} {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => resolve = r);
  return { promise, resolve };
}

/**
 * Waits `ms` milliseconds. Only for a real clock that must move (a lease or
 * TTL on a server's clock) or for a pause between polls: a test never sleeps
 * in the hope that some work is done by then; it waits for a state with
 * {@linkcode waitFor}.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Resolves once `check()` holds, looking again every 10 ms. It waits for a
 * state, however long the machine takes to reach it; `ms` is only a bound so
 * that a state never reached fails the test instead of hanging it.
 *
 * @param what What is awaited, for the failure message.
 * @param check What must hold.
 * @param ms When to fail instead of hanging.
 */
export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  ms = 20_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`Gave up waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * {@linkcode waitFor} with the arguments the other way round (check first),
 * as `tests/_wait.ts` has always exported it.
 *
 * @param check What must hold.
 * @param what What is awaited, for the failure message.
 * @param ms When to fail instead of hanging.
 */
export function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 30_000,
): Promise<void> {
  return waitFor(what, check, ms);
}

/**
 * POSTs a body with an idempotency key over the network, with `fetch`.
 *
 * @param url Where to.
 * @param key The idempotency key.
 * @param body The body.
 * @returns The response.
 */
export function fetchPost(
  url: string,
  key: string,
  body = "{}",
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "idempotency-key": key },
    body,
  });
}

/** A `Deno.serve` of a test: see {@linkcode serveLocal}. */
export interface LocalServer extends AsyncDisposable {
  /** Its loopback port. */
  readonly port: number;
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Every error that escaped the handler to `onError` (answered 500). */
  readonly escaped: unknown[];
  /** Stops it; also what disposing it does. */
  shutdown(): Promise<void>;
}

/**
 * Serves `handler` on a free loopback port, answering 500 to (and keeping)
 * any error that escapes it. Stop it with `shutdown()` or `await using`.
 *
 * @param handler The fetch handler.
 * @returns The running server.
 */
export function serveLocal(
  handler: (request: Request) => Response | Promise<Response>,
): LocalServer {
  const escaped: unknown[] = [];
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen() {},
    onError(error) {
      escaped.push(error);
      return new Response("server error", { status: 500 });
    },
  }, handler);
  const { port } = server.addr;
  const shutdown = () => server.shutdown();
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    escaped,
    shutdown,
    [Symbol.asyncDispose]: shutdown,
  };
}

/**
 * A loopback port nobody listens on at the time of asking.
 *
 * @returns The port.
 */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/**
 * Whether something accepts TCP connections on a loopback port.
 *
 * @param port The port.
 * @returns Whether a connection opened.
 */
export async function listening(port: number): Promise<boolean> {
  try {
    (await Deno.connect({ hostname: "127.0.0.1", port })).close();
    return true;
  } catch {
    return false;
  }
}

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
 * Time that moves only when the test moves it, with timers that fire in
 * order: the heartbeat's clock in lease tests (see `HEARTBEAT_CLOCK`), and a
 * store's (`clock: () => time.now()`, `elapse: (ms) => time.advance(ms)`).
 */
export class FakeClock implements Clock {
  #now: number;
  #timers = new Set<{ at: number; fn: () => void }>();

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): () => void {
    const timer = { at: this.#now + ms, fn };
    this.#timers.add(timer);
    return () => this.#timers.delete(timer);
  }

  /** Timers not yet fired. */
  get pending(): number {
    return this.#timers.size;
  }

  /**
   * Moves to `target`, firing each timer due on the way at its own time, and
   * after each one waits for what `settle` returns (by default, one turn of
   * the event loop, so that what a timer started can answer).
   */
  async advanceTo(
    target: number,
    settle: () => Promise<void> = () => sleep(0),
  ): Promise<void> {
    for (;;) {
      let first: { at: number; fn: () => void } | undefined;
      for (const timer of this.#timers) {
        if (timer.at <= target && (!first || timer.at < first.at)) {
          first = timer;
        }
      }
      if (first === undefined) break;
      this.#timers.delete(first);
      this.#now = first.at;
      first.fn();
      await settle();
    }
    this.#now = target;
  }

  /** {@linkcode FakeClock.advanceTo} `ms` from now. */
  advance(ms: number, settle?: () => Promise<void>): Promise<void> {
    return this.advanceTo(this.#now + ms, settle);
  }
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
 * Spawns `count` processes of `deno run` (net, env and read allowed, plus
 * `flags`) of `script`, each with the arguments `args` gives for a free port
 * of its own, and waits until every one listens on its port; stops them all
 * (SIGTERM) if one does not. `stop` does the same after the test.
 */
export async function spawnApps(
  script: URL,
  count: number,
  args: (port: number, i: number) => string[],
  env: Record<string, string>,
  flags: string[] = [],
): Promise<{ ports: number[]; stop: () => Promise<void> }> {
  const ports = Array.from({ length: count }, () => freePort());
  const children = ports.map((port, i) =>
    new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-net",
        "--allow-env",
        "--allow-read",
        ...flags,
        script.pathname,
        ...args(port, i),
      ],
      env,
      stdout: "null",
      stderr: "inherit",
    }).spawn()
  );
  const stop = async () => {
    for (const child of children) {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
    }
  };
  try {
    await Promise.all(
      ports.map((port) =>
        waitFor(`the app on port ${port}`, () => listening(port))
      ),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { ports, stop };
}
