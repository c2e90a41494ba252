// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The OpenTelemetry bridge end to end: tests/otel/app.ts runs under Deno's
 * built-in OpenTelemetry (`OTEL_DENO=true`), exporting OTLP/HTTP JSON to a
 * receiver served here on 127.0.0.1, which must see the bridge's metric
 * names and its `idempotency.*` attributes on Deno's HTTP server spans.
 *
 * @module
 */

import assert from "node:assert/strict";

/** The OTLP JSON this test reads (only the fields it looks at). */
interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; boolValue?: boolean };
}
interface OtlpExport {
  resourceMetrics?: {
    scopeMetrics: {
      scope: { name: string };
      metrics: { name: string; unit?: string }[];
    }[];
  }[];
  resourceSpans?: {
    scopeSpans: { spans: { kind: number; attributes: OtlpAttribute[] }[] }[];
  }[];
}

const SPAN_KIND_SERVER = 2;
/** Only a bound, so that a receiver that never sees them fails instead of hanging. */
const BOUND_MS = 60_000;

Deno.test("idempotencyTelemetry() under OTEL_DENO=true exports its metrics and sets its attributes on Deno's HTTP server spans", async () => {
  const units = new Map<string, string | undefined>();
  const outcomes = new Map<string, boolean | undefined>();
  const arrived = Promise.withResolvers<void>();
  const check = () => {
    if (
      units.has("idempotency.requests") &&
      units.has("idempotency.store.duration") &&
      outcomes.has("executed") && outcomes.has("replayed")
    ) arrived.resolve();
  };
  await using receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      const body = await req.json() as OtlpExport;
      for (const { scopeMetrics } of body.resourceMetrics ?? []) {
        for (const { scope, metrics } of scopeMetrics) {
          if (scope.name !== "@idempotent/http") continue;
          for (const { name, unit } of metrics) units.set(name, unit);
        }
      }
      for (const { scopeSpans } of body.resourceSpans ?? []) {
        for (const { spans } of scopeSpans) {
          for (const span of spans) {
            if (span.kind !== SPAN_KIND_SERVER) continue;
            const value = (key: string) =>
              span.attributes.find((a) => a.key === key)?.value;
            const outcome = value("idempotency.outcome")?.stringValue;
            if (outcome === undefined) continue;
            outcomes.set(outcome, value("idempotency.replayed")?.boolValue);
          }
        }
      }
      check();
      return Response.json({});
    },
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net=127.0.0.1", "tests/otel/app.ts"],
    env: {
      OTEL_DENO: "true",
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.addr.port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_METRIC_EXPORT_INTERVAL: "100",
      OTEL_SERVICE_NAME: "idempotency-e2e",
    },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = await child.output();
  assert.ok(
    output.success,
    `the app failed: ${new TextDecoder().decode(output.stderr)}`,
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `Gave up: metrics ${[...units.keys()]}, outcomes ${[
              ...outcomes.keys(),
            ]}`,
          ),
        ),
      BOUND_MS,
    );
  });
  try {
    await Promise.race([arrived.promise, bound]);
  } finally {
    clearTimeout(timer);
  }
  assert.equal(units.get("idempotency.requests"), "{request}");
  assert.equal(units.get("idempotency.store.duration"), "s");
  assert.equal(outcomes.get("executed"), false);
  assert.equal(outcomes.get("replayed"), true);
});
