// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * An OTLP/HTTP JSON receiver on 127.0.0.1, for apps run as subprocesses
 * under Deno's built-in OpenTelemetry (`OTEL_DENO=true`): it keeps every
 * metric data point and server span it is sent, and lets a test wait for
 * one. {@linkcode otelEnv} is the environment that points an app at it.
 *
 * @module
 */

import { waitFor } from "./time.ts";

/** An OTLP attribute value, as the JSON encoding writes it. */
interface OtlpValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
}

interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

interface OtlpPoint {
  attributes?: OtlpAttribute[];
  asInt?: string | number;
  asDouble?: number;
  count?: string | number;
}

interface OtlpMetric {
  name: string;
  unit?: string;
  sum?: { dataPoints?: OtlpPoint[] };
  gauge?: { dataPoints?: OtlpPoint[] };
  histogram?: { dataPoints?: OtlpPoint[] };
}

interface OtlpExport {
  resourceMetrics?: {
    scopeMetrics?: { scope?: { name?: string }; metrics?: OtlpMetric[] }[];
  }[];
  resourceSpans?: {
    scopeSpans?: {
      spans?: { name?: string; kind?: number; attributes?: OtlpAttribute[] }[];
    }[];
  }[];
}

/** Attribute values, flattened to strings (`true`, `42`). */
export type Attributes = Record<string, string>;

/** One data point of a metric: a counter's sum, a histogram's count. */
export interface Point {
  /** The instrumentation scope (`@idempotent/http`). */
  scope: string;
  name: string;
  unit: string | undefined;
  attributes: Attributes;
  /** The sum (counter) or the count (histogram). */
  value: number;
}

/** One span (kind 2 is a server span). */
export interface Span {
  name: string;
  kind: number;
  attributes: Attributes;
}

/** A running receiver: see {@linkcode startOtlpReceiver}. */
export interface OtlpReceiver extends AsyncDisposable {
  /** `http://127.0.0.1:<port>`, for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly endpoint: string;
  /** Every point received, in order (cumulative points repeat). */
  readonly points: Point[];
  /** Every span received. */
  readonly spans: Span[];
  /**
   * The points of `name` whose attributes include `where`, with a value
   * above 0.
   */
  find(name: string, where?: Attributes): Point[];
  /** Waits until {@linkcode OtlpReceiver.find} finds one; returns it. */
  waitForPoint(name: string, where?: Attributes, ms?: number): Promise<Point>;
  /** Stops listening. */
  close(): Promise<void>;
}

function flatten(attributes: OtlpAttribute[] | undefined): Attributes {
  const out: Attributes = {};
  for (const { key, value } of attributes ?? []) {
    const v = value.stringValue ?? value.boolValue ?? value.intValue ??
      value.doubleValue;
    out[key] = String(v);
  }
  return out;
}

/**
 * Serves an OTLP/HTTP JSON receiver on a free loopback port (`/v1/metrics`,
 * `/v1/traces`, `/v1/logs`: every POST is read the same way).
 *
 * @returns The receiver; close it, or hold it with `await using`.
 */
export function startOtlpReceiver(): OtlpReceiver {
  const points: Point[] = [];
  const spans: Span[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      const body = await req.json().catch(() => ({})) as OtlpExport;
      for (const { scopeMetrics } of body.resourceMetrics ?? []) {
        for (const { scope, metrics } of scopeMetrics ?? []) {
          for (const metric of metrics ?? []) {
            const data = metric.sum ?? metric.gauge ?? metric.histogram;
            for (const point of data?.dataPoints ?? []) {
              points.push({
                scope: scope?.name ?? "",
                name: metric.name,
                unit: metric.unit,
                attributes: flatten(point.attributes),
                value: Number(
                  point.asInt ?? point.asDouble ?? point.count ?? 0,
                ),
              });
            }
          }
        }
      }
      for (const { scopeSpans } of body.resourceSpans ?? []) {
        for (const scoped of scopeSpans ?? []) {
          for (const span of scoped.spans ?? []) {
            spans.push({
              name: span.name ?? "",
              kind: span.kind ?? 0,
              attributes: flatten(span.attributes),
            });
          }
        }
      }
      return Response.json({});
    },
  );
  const find = (name: string, where: Attributes = {}) =>
    points.filter((p) =>
      p.name === name && p.value > 0 &&
      Object.entries(where).every(([k, v]) => p.attributes[k] === v)
    );
  const close = () => server.shutdown();
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    points,
    spans,
    find,
    async waitForPoint(name, where = {}, ms = 30_000) {
      try {
        await waitFor("a data point", () => find(name, where).length > 0, ms);
      } catch {
        const seen = points.filter((p) => p.name === name)
          .map((p) => `${JSON.stringify(p.attributes)} ${p.value}`);
        throw new Error(
          `no data point of ${name} with ${
            JSON.stringify(where)
          } in ${ms} ms; ${
            seen.length > 0
              ? `its points: ${[...new Set(seen)].join("; ")}`
              : `metrics received: ${
                [...new Set(points.map((p) => p.name))].join(", ") || "none"
              }`
          }`,
        );
      }
      return find(name, where)[0]!;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/**
 * The environment that makes a `deno run` export its metrics and spans to
 * `receiver` as OTLP/HTTP JSON, every 100 ms.
 *
 * @param receiver The receiver.
 * @param service The `service.name`.
 * @returns Environment variables.
 */
export function otelEnv(
  receiver: OtlpReceiver,
  service = "idempotency-test",
): Record<string, string> {
  return {
    OTEL_DENO: "true",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_METRIC_EXPORT_INTERVAL: "100",
    OTEL_SERVICE_NAME: service,
  };
}
