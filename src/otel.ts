// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * OpenTelemetry metrics and span attributes for the middleware and its stores,
 * on `@opentelemetry/api`. Under `OTEL_DENO=true` they go to Deno's exporter
 * and HTTP server spans with no other setup (docs/architecture.md,
 * OpenTelemetry).
 *
 * | Name | Instrument | Unit | Attributes |
 * | --- | --- | --- | --- |
 * | `idempotency.requests` | counter | `{request}` | `idempotency.outcome` (a {@linkcode RequestOutcome}) |
 * | `idempotency.store.duration` | histogram | `s` | `idempotency.store`, `idempotency.store.operation`, `error.type` (when it threw) |
 * | `idempotency.store.errors` | counter | `{error}` | `idempotency.store.operation`, `error.type` |
 * | `idempotency.write.retries` | counter | `{retry}` | `idempotency.store.operation` (`complete`, `release`) |
 * | `idempotency.write.given_up` | counter | `{write}` | `idempotency.store.operation` (`complete`, `release`) |
 * | `idempotency.lease.lost` | counter | `{lease}` | |
 * | `idempotency.undos` | counter | `{undo}` | `idempotency.undo.outcome` (`applied`, `lost`, `dropped`) |
 * | `idempotency.failover.fallbacks` | counter | `{fallback}` | |
 * | `idempotency.failover.recoveries` | counter | `{recovery}` | `idempotency.failover.copied` |
 *
 * A request's outcome also goes on the active span: `idempotency.outcome`,
 * `idempotency.replayed` and `idempotency.slot_prefix` (the slot's first 8
 * characters). One wiring covers the middleware, the store and a
 * FailoverStore's two stores: `store: telemetry.store(store)` and
 * `onEvent: telemetry.onEvent`.
 *
 * @example Count outcomes with an SDK meter provider
 * ```ts
 * import { idempotency, MemoryStore } from "@idempotent/http";
 * import { idempotencyTelemetry } from "@idempotent/http/otel";
 * import {
 *   AggregationTemporality,
 *   InMemoryMetricExporter,
 *   MeterProvider,
 *   PeriodicExportingMetricReader,
 * } from "@opentelemetry/sdk-metrics";
 * import assert from "node:assert/strict";
 *
 * const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
 * const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
 * const meterProvider = new MeterProvider({ readers: [reader] });
 * const telemetry = idempotencyTelemetry({ meterProvider });
 * const handler = idempotency(() => new Response("ok"), {
 *   scope: "global", // one key space: this example has one caller
 *   store: telemetry.store(new MemoryStore()), // timed, and its reports counted
 *   onEvent: telemetry.onEvent, // the log stays on (the `logger` option)
 * });
 * const post = () => new Request("http://localhost/pay", { method: "POST", headers: { "idempotency-key": "k1" } });
 * await (await handler(post())).text();
 * await (await handler(post())).text();
 *
 * await reader.forceFlush();
 * const names = exporter.getMetrics()[0]!.scopeMetrics[0]!.metrics.map((m) => m.descriptor.name);
 * assert.ok(names.includes("idempotency.requests"));
 * assert.ok(names.includes("idempotency.store.duration"));
 * await meterProvider.shutdown();
 * ```
 *
 * @module
 */

import {
  type Attributes,
  type Counter,
  type Histogram,
  type Meter,
  metrics,
  trace,
} from "@opentelemetry/api";
import type { IdempotencyEvent } from "./events.ts";
import type {
  FailoverEvent,
  IdempotencyStore,
  StoreEvent,
  StoreOperation,
  StoreReport,
} from "./store.ts";

/** An `@opentelemetry/api` `MeterProvider`, the SDK's or Deno's. */
export interface MeterProviderLike {
  /** The meter of an instrumentation scope, here `@idempotent/http`. */
  getMeter(name: string): object;
}

/**
 * What became of one guarded request: `executed` (the handler ran under a
 * claim), `replayed`, `waited` (replayed after waiting for the holder),
 * `conflict` (409), `unreadable` (500: the key's record cannot be read),
 * `mismatch` (422), `rejected` (400, 413), `unavailable` (503) or `fail_open`
 * (the handler ran unguarded).
 */
// deno-fmt-ignore
export type RequestOutcome = "executed" | "replayed" | "waited" | "conflict" | "unreadable"
  | "mismatch" | "rejected" | "unavailable" | "fail_open";

/** Options of {@linkcode idempotencyTelemetry}. */
export interface TelemetryOptions {
  /**
   * Where the instruments come from.
   * @default {metrics.getMeterProvider()} (Deno's with `OTEL_DENO=true`)
   */
  meterProvider?: MeterProviderLike;
  /**
   * Whether each request's outcome goes on the active span as `idempotency.*` attributes.
   * @default {true}
   */
  spanAttributes?: boolean;
}

/** The listeners and the store wrapper of {@linkcode idempotencyTelemetry}. */
export interface IdempotencyTelemetry {
  /** The middleware's `onEvent`: a listener of its own can call it too. */
  readonly onEvent: (event: IdempotencyEvent) => void;
  /** A FailoverStore's `onEvent` (the same function as `onStoreEvent`: counted once with `store()`). */
  readonly onFailoverEvent: (event: FailoverEvent) => void;
  /** A Redis, PostgreSQL or KV store's `onEvent`. */
  readonly onStoreEvent: (event: StoreEvent) => void;
  /**
   * `inner`, its type and every other property kept, with `claim`, `complete`,
   * `release` and `extend` timed into `idempotency.store.duration` as `name`,
   * and its reports (a FailoverStore's, and its two stores' undos) counted
   * through its `subscribe()`.
   * @param name The `idempotency.store` attribute. @default the class's
   * name less `Store`, lower case (`failover`, `redis`, `postgres`)
   */
  store<S extends IdempotencyStore>(inner: S, name?: string): S;
}

/** Seconds, from 100 µs (an in-process store) to 10 s (a store call's deadline). */
// deno-fmt-ignore
const DURATION_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
  0.5, 1, 2.5, 5, 10,
];

/**
 * The instruments of this module's table, and the listeners that feed them.
 *
 * @param options The meter provider, and whether to set span attributes.
 * @returns The listeners to pass as `onEvent`, and the store wrapper.
 *
 * @example Keep a listener of your own beside it
 * ```ts
 * import { idempotency, type IdempotencyEvent } from "@idempotent/http";
 * import { idempotencyTelemetry } from "@idempotent/http/otel";
 * import assert from "node:assert/strict";
 *
 * const telemetry = idempotencyTelemetry(); // the global meter provider: a no-op unless one is registered
 * const seen: IdempotencyEvent["type"][] = [];
 * const onEvent = (event: IdempotencyEvent) => (telemetry.onEvent(event), seen.push(event.type));
 * const handler = idempotency(() => new Response("ok"), { scope: "global", onEvent });
 * const res = await handler(new Request("http://localhost/pay", { method: "POST", headers: { "idempotency-key": "k1" } }));
 * assert.equal(await res.text(), "ok");
 * assert.deepEqual(seen, ["claimed", "completed"]);
 * ```
 */
export function idempotencyTelemetry(
  options: TelemetryOptions = {},
): IdempotencyTelemetry {
  const provider = options.meterProvider ?? metrics.getMeterProvider();
  const spans = options.spanAttributes ?? true;
  const meter = provider.getMeter("@idempotent/http") as Meter;
  const counter = (name: string, unit: string, description: string) =>
    meter.createCounter(name, { unit, description });
  // deno-fmt-ignore
  const requests = counter("idempotency.requests", "{request}", "Guarded requests, by outcome."),
    errors = counter("idempotency.store.errors", "{error}", "Store operations that threw, as the middleware saw them."),
    retries = counter("idempotency.write.retries", "{retry}", "Settling writes tried again after a throw."),
    givenUp = counter("idempotency.write.given_up", "{write}", "Settling writes whose outcome stayed unknown."),
    leaseLost = counter("idempotency.lease.lost", "{lease}", "Claims a heartbeat found taken over."),
    undos = counter("idempotency.undos", "{undo}", "Undos of late claims, by outcome."),
    fallbacks = counter("idempotency.failover.fallbacks", "{fallback}", "Claims a FailoverStore sent to its fallback."),
    recoveries = counter("idempotency.failover.recoveries", "{recovery}", "Slots a FailoverStore found on its fallback once the primary answered.");
  const duration = meter.createHistogram("idempotency.store.duration", {
    unit: "s",
    description: "Time of a store operation.",
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });

  const outcome = (result: RequestOutcome, slot: string | null): void => {
    requests.add(1, { "idempotency.outcome": result });
    const span = spans ? trace.getActiveSpan() : undefined;
    span?.setAttributes({
      "idempotency.outcome": result,
      "idempotency.replayed": result === "replayed" || result === "waited",
    });
    if (slot !== null) {
      span?.setAttribute("idempotency.slot_prefix", slot.slice(0, 8));
    }
  };
  const write = (metric: Counter, operation: StoreOperation) =>
    metric.add(1, { "idempotency.store.operation": operation });
  const report = (event: StoreReport): void => {
    if (event.type === "fallback") fallbacks.add(1);
    else if (event.type === "recovered") {
      recoveries.add(1, { "idempotency.failover.copied": event.copied });
    } else if (event.type === "undo") {
      undos.add(1, { "idempotency.undo.outcome": event.outcome });
    }
  };

  return {
    onEvent(event) {
      switch (event.type) {
        case "claimed":
          return outcome("executed", event.slot);
        case "replayed":
          return outcome(event.waited ? "waited" : "replayed", event.slot);
        case "conflict":
          return outcome(
            event.unreadable ? "unreadable" : "conflict",
            event.slot,
          );
        case "mismatch":
        case "rejected":
        case "unavailable":
        case "fail_open":
          return outcome(event.type, event.slot);
        case "store_error":
          return errors.add(1, {
            "idempotency.store.operation": event.operation,
            "error.type": errorType(event.error),
          });
        case "write_retry":
          return write(retries, event.operation);
        case "completed":
          if (event.outcome === "unknown") write(givenUp, "complete");
          return;
        case "released":
          if (event.outcome === "unknown") write(givenUp, "release");
          return;
        case "lease_lost":
          return leaseLost.add(1);
      }
    },
    onFailoverEvent: report,
    onStoreEvent: report,
    store(inner, name = nameOf(inner)) {
      const store = timed(inner, name, duration);
      inner.subscribe?.(report);
      return store;
    },
  };
}

/** `FailoverStore` → `failover`; `store` for a class without a name. */
function nameOf(store: object): string {
  const type = store.constructor === Object ? "" : store.constructor?.name;
  return type?.replace(/Store$/, "").toLowerCase() || "store";
}

/** `error.type`: the error's name (`StoreError` mostly), else `_OTHER`. */
function errorType(error: unknown): string {
  return error instanceof Error ? error.name : "_OTHER";
}

function timed<S extends IdempotencyStore>(
  inner: S,
  name: string,
  histogram: Histogram,
): S {
  if (typeof name !== "string" || name === "") {
    throw new TypeError(
      `'name' must be a non-empty string: current value is ${
        JSON.stringify(name)
      }`,
    );
  }
  const own = new Map<PropertyKey, unknown>();
  for (const operation of ["claim", "complete", "release", "extend"] as const) {
    const method = inner[operation] as (...args: unknown[]) => Promise<unknown>;
    const base: Attributes = {
      "idempotency.store": name,
      "idempotency.store.operation": operation,
    };
    own.set(operation, async (...args: unknown[]) => {
      const started = performance.now();
      let attributes = base;
      try {
        return await method.apply(inner, args);
      } catch (error) {
        attributes = { ...attributes, "error.type": errorType(error) };
        throw error;
      } finally {
        histogram.record((performance.now() - started) / 1000, attributes);
      }
    });
  }
  // Every other method runs on the inner store itself (its private fields).
  return new Proxy(inner, {
    get(target, property) {
      if (own.has(property)) return own.get(property);
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      const bound = value.bind(target);
      own.set(property, bound);
      return bound;
    },
  });
}
