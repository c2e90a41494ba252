// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The in-process side of the fault-injection suite: a ledger of executions
 * the library never touches, an app that writes to it, a load of many keys
 * times duplicates at bounded concurrency, the check of every answer against
 * the ledger, and the settle phase that proves no key is left in flight.
 *
 * Vocabulary of the counts:
 *
 * - execution: one run of the app handler, written to the ledger first thing.
 * - duplicate: a 2xx execution of a key beyond the first one that the case
 *   allows (normally one per key).
 * - altered: an answer that is neither the handler's exact bytes (live, or
 *   replayed from the key's 2xx execution) nor a problem document
 *   (409/503, `application/problem+json`).
 * - stuck: a key that, after the load, does not settle into a replay of its
 *   2xx execution within the bound.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency, type IdempotencyOptions } from "../../mod.ts";
import type { IdempotencyStore } from "../../src/store.ts";
import { sleep } from "../_support/time.ts";

/**
 * `{ encryption }` when `IDEMPOTENCY_FAULTS_SEALED=1` (tests/faults/sealed_test.ts
 * runs the whole fault suite again so), else nothing: every app of the fault
 * suite spreads it into its options.
 */
export const SEALING: Pick<IdempotencyOptions, "encryption"> =
  Deno.env.get("IDEMPOTENCY_FAULTS_SEALED") === "1"
    ? {
      encryption: {
        keys: [{
          id: "faults",
          key: await crypto.subtle.importKey(
            "raw",
            new Uint8Array(32).fill(7),
            "AES-GCM",
            false,
            ["encrypt", "decrypt"],
          ),
        }],
      },
    }
    : {};

/** One run of the app handler, as the ledger saw it. */
export interface Execution {
  /** The status the handler answered. */
  status: number;
  /** The body it answered. */
  body: string;
  /** The ledger's generation when it ran (bumped when a store loses its data). */
  generation: number;
}

/** Executions per key, kept outside the library. */
export class Ledger {
  readonly runs = new Map<string, Execution[]>();
  generation = 0;

  /** Writes an execution down and returns it (body filled in by the caller). */
  record(key: string, status: number, body?: string): Execution {
    const list = this.runs.get(key) ?? [];
    const execution: Execution = {
      status,
      body: body ?? `${key} run ${list.length + 1} ${crypto.randomUUID()}`,
      generation: this.generation,
    };
    list.push(execution);
    this.runs.set(key, list);
    return execution;
  }

  /** The executions of a key. */
  of(key: string): Execution[] {
    return this.runs.get(key) ?? [];
  }

  /** How many executions in all. */
  get total(): number {
    let n = 0;
    for (const list of this.runs.values()) n += list.length;
    return n;
  }
}

/** What the app does per key. */
export interface AppOptions {
  /** Keys whose first execution answers 500 (not cacheable: released). */
  flaky?: (key: string) => boolean;
  /** Awaited before answering (a slow payment provider). */
  hold?: (key: string) => Promise<void> | void;
}

/**
 * The app under test: writes the execution to the ledger, then answers 201
 * (or 500 on a flaky key's first run) with a body unique to the execution.
 */
export function app(
  ledger: Ledger,
  options: AppOptions = {},
): (request: Request) => Promise<Response> {
  return async (request) => {
    const key = request.headers.get("idempotency-key") ?? "";
    await request.arrayBuffer();
    const first = ledger.of(key).length === 0;
    const status = first && options.flaky?.(key) ? 500 : 201;
    const execution = ledger.record(key, status);
    await options.hold?.(key);
    return new Response(execution.body, {
      status,
      headers: { "content-type": "text/plain", "x-run": execution.body },
    });
  };
}

/**
 * One app process of the multi-process cases: `Deno.serve` on a free port
 * with `idempotency()` over a handler that hands each execution to `tell`
 * (the ledger, outside the process, so it survives a SIGKILL) BEFORE it
 * answers 201 with a body unique to the execution; prints
 * `listening <port>` when it listens.
 */
export function serveApp(
  tell: (key: string, body: string) => Promise<unknown>,
  options: IdempotencyOptions,
): void {
  Deno.serve(
    {
      hostname: "127.0.0.1",
      port: 0,
      onListen({ port }) {
        // deno-lint-ignore no-console
        console.log(`listening ${port}`);
      },
    },
    idempotency(async (req) => {
      const key = req.headers.get("idempotency-key") ?? "";
      await req.arrayBuffer();
      const body = `${key} by ${Deno.pid} ${crypto.randomUUID()}`;
      await tell(key, body);
      return new Response(body, {
        status: 201,
        headers: { "content-type": "text/plain" },
      });
    }, { ...SEALING, ...options }),
  );
}

/** A guarded handler, called directly or over HTTP. */
export type Send = (key: string) => Promise<Response>;

/** Sends a payment for `key` to the app process listening on `port`. */
export function sender(port: number): Send {
  return (key) =>
    fetch(`http://127.0.0.1:${port}/payments`, {
      method: "POST",
      headers: { "idempotency-key": key, "content-type": "application/json" },
      body: JSON.stringify({ key }),
    });
}

/** A request for `key` to the in-process handler. */
export function direct(
  handler: (request: Request) => Response | Promise<Response>,
): Send {
  return async (key) =>
    await handler(
      new Request("http://faults.test/payments", {
        method: "POST",
        headers: { "idempotency-key": key, "content-type": "application/json" },
        body: JSON.stringify({ key }),
      }),
    );
}

/**
 * The app under the middleware on `store`, called in process, with a fresh
 * ledger and a count of the `store_error` events: what every fault case
 * under load starts from.
 *
 * @param store The store under test (with its faults).
 * @param lease The middleware's lease, in ms.
 */
export function guardedApp(store: IdempotencyStore, lease: number): {
  ledger: Ledger;
  send: Send;
  storeErrors: () => number;
} {
  const ledger = new Ledger();
  let storeErrors = 0;
  const send = direct(
    idempotency(app(ledger), {
      ...SEALING,
      scope: "global",
      store,
      lease,
      ttl: 600_000,
      onEvent(event) {
        if (event.type === "store_error") storeErrors++;
      },
    }),
  );
  return { ledger, send, storeErrors: () => storeErrors };
}

/**
 * The verdict of a fault case: no duplicate execution, no altered answer,
 * no key left in flight.
 */
export function assertNoHarm(
  dup: { keys: string[] },
  seen: Tally,
  settled: Settled,
): void {
  assert.deepEqual(dup.keys, [], "duplicate executions");
  assert.deepEqual(seen.altered, [], "altered answers");
  assert.deepEqual(settled.stuck, [], "keys still in flight");
}

/** What a load saw. */
export interface Tally {
  requests: number;
  statuses: Record<string, number>;
  altered: string[];
}

/** Makes an empty tally. */
export function tally(): Tally {
  return { requests: 0, statuses: {}, altered: [] };
}

/**
 * Checks one answer against the ledger and counts it.
 *
 * @returns `"replay"`, `"live"`, `"problem"`, or `"altered"`.
 */
export async function judge(
  ledger: Ledger,
  key: string,
  response: Response,
  seen: Tally,
): Promise<"replay" | "live" | "problem" | "altered"> {
  const body = await response.text();
  const status = response.status;
  const replayed = response.headers.get("idempotent-replayed") === "true";
  const label = replayed ? `${status}r` : String(status);
  seen.requests++;
  seen.statuses[label] = (seen.statuses[label] ?? 0) + 1;
  const runs = ledger.of(key);
  if (status === 409 || status === 503) {
    if (
      response.headers.get("content-type")?.startsWith(
        "application/problem+json",
      )
    ) return "problem";
  } else if (replayed) {
    if (runs.some((r) => r.status === status && r.body === body)) {
      return "replay";
    }
  } else if (runs.some((r) => r.status === status && r.body === body)) {
    return "live";
  }
  seen.altered.push(`${key}: ${label} ${JSON.stringify(body.slice(0, 80))}`);
  return "altered";
}

/** Runs `work` over `items` with at most `limit` at a time. */
export async function pool<T>(
  items: T[],
  limit: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await work(items[i]!, i);
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, worker),
  );
}

/** Options of {@linkcode load}. */
export interface LoadOptions {
  keys: string[];
  duplicates: number;
  concurrency: number;
  /** Called after each answer with how many are done (to inject faults on progress). */
  progress?: (done: number, total: number) => void | Promise<void>;
}

/**
 * Sends every key `duplicates` times, interleaved so that duplicates race,
 * at bounded concurrency, and judges every answer.
 */
export async function load(
  send: Send,
  ledger: Ledger,
  options: LoadOptions,
  seen: Tally = tally(),
): Promise<Tally> {
  const order: string[] = [];
  // Duplicates of a key sit close together so they overlap in flight.
  for (let i = 0; i < options.keys.length; i += 4) {
    const group = options.keys.slice(i, i + 4);
    for (let d = 0; d < options.duplicates; d++) order.push(...group);
  }
  let done = 0;
  await pool(order, options.concurrency, async (key) => {
    let response: Response;
    try {
      response = await send(key);
    } catch (error) {
      seen.requests++;
      seen.altered.push(`${key}: threw ${String(error)}`);
      return;
    }
    await judge(ledger, key, response, seen);
    await options.progress?.(++done, order.length);
  });
  return seen;
}

/** What {@linkcode settle} found. */
export interface Settled {
  /** Keys that never settled into a replay within the bound. */
  stuck: string[];
  /** Requests sent while settling. */
  probes: number;
}

/**
 * After the load: retries every key until it replays its 2xx execution
 * (a key that never ran runs now, once), within `boundMs` from the start.
 * A 409 or 503 is retried after a short pause; a stuck key is a failure.
 *
 * With `unreachableMs`, a 503 (the store unreachable, through no fault of
 * the library: a driver still reconnecting) is not counted as time in
 * flight: the bound runs `boundMs` from the start or from the last 503,
 * whichever is later, but never past `unreachableMs` from the start. A key
 * in flight `boundMs` after the store answers again is still stuck.
 */
export async function settle(
  send: Send,
  ledger: Ledger,
  keys: string[],
  boundMs: number,
  seen: Tally,
  concurrency = 16,
  unreachableMs = 0,
): Promise<Settled> {
  const stuck: string[] = [];
  let probes = 0;
  const start = Date.now();
  let deadline = start + boundMs;
  await pool(keys, concurrency, async (key) => {
    for (;;) {
      probes++;
      let verdict: string;
      let lastStatus = 0;
      try {
        const response = await send(key);
        lastStatus = response.status;
        verdict = await judge(ledger, key, response, seen);
      } catch (error) {
        verdict = "threw";
        seen.altered.push(`${key}: threw while settling ${String(error)}`);
      }
      if (verdict === "replay") return;
      if (verdict === "problem" && lastStatus === 503) {
        deadline = Math.max(
          deadline,
          Math.min(Date.now() + boundMs, start + unreachableMs),
        );
      }
      if (Date.now() > deadline) {
        stuck.push(
          `${key} (${verdict} ${lastStatus}, ${ledger.of(key).length} runs)`,
        );
        return;
      }
      if (verdict !== "live") {
        await sleep(25);
      }
    }
  });
  return { stuck, probes };
}

/** Counts the 2xx executions beyond what each key is allowed. */
export function duplicates(
  ledger: Ledger,
  allowed: (key: string, runs: Execution[]) => number = () => 1,
): { count: number; keys: string[] } {
  let count = 0;
  const keys: string[] = [];
  for (const [key, runs] of ledger.runs) {
    const ok = runs.filter((r) => r.status >= 200 && r.status < 300);
    const extra = ok.length - allowed(key, runs);
    if (extra > 0) {
      count += extra;
      keys.push(`${key} x${ok.length}`);
    }
  }
  return { count, keys };
}

/**
 * One 2xx execution per key per generation: for a store that lost its data
 * (restarted empty), a key that ran before the loss may run once more after it.
 */
export function perGeneration(_key: string, runs: Execution[]): number {
  const ok = runs.filter((r) => r.status >= 200 && r.status < 300);
  return new Set(ok.map((r) => r.generation)).size;
}

/** The figures every case under load reports, from what it saw. */
export function loadFigures(
  seen: Tally,
  ledger: Ledger,
  dup: { count: number },
  settled: Settled,
): Record<string, unknown> {
  return {
    requests: seen.requests,
    executions: ledger.total,
    duplicates: dup.count,
    altered: seen.altered.length,
    stuck: settled.stuck.length,
    statuses: seen.statuses,
  };
}

/** The figures a case prints for the lead to quote. */
export function report(
  name: string,
  figures: Record<string, unknown>,
): void {
  // deno-lint-ignore no-console
  console.log(`[faults] ${name}: ${JSON.stringify(figures)}`);
}
