// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The OpenTelemetry bridge end to end: tests/otel/app.ts runs under Deno's
 * built-in OpenTelemetry (`OTEL_DENO=true`), exporting OTLP/HTTP JSON to a
 * receiver served here on 127.0.0.1 (tests/_support/otlp.ts), which must see
 * the bridge's metric names and its `idempotency.*` attributes on Deno's HTTP
 * server spans.
 *
 * @module
 */

import assert from "node:assert/strict";
import { otelEnv, startOtlpReceiver } from "./_support/otlp.ts";
import { waitFor } from "./_support/time.ts";

const SPAN_KIND_SERVER = 2;
/** Only a bound, so that a receiver that never sees them fails instead of hanging. */
const BOUND_MS = 60_000;

Deno.test("idempotencyTelemetry() under OTEL_DENO=true exports its metrics and sets its attributes on Deno's HTTP server spans", async () => {
  await using receiver = startOtlpReceiver();
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net=127.0.0.1", "tests/otel/app.ts"],
    env: otelEnv(receiver, "idempotency-e2e"),
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(
    output.success,
    `the app failed: ${new TextDecoder().decode(output.stderr)}`,
  );
  const requests = await receiver.waitForPoint(
    "idempotency.requests",
    {},
    BOUND_MS,
  );
  const duration = await receiver.waitForPoint(
    "idempotency.store.duration",
    {},
    BOUND_MS,
  );
  assert.equal(requests.scope, "@idempotent/http");
  assert.equal(requests.unit, "{request}");
  assert.equal(duration.unit, "s");
  // The outcome of each request on its server span, with whether it replayed.
  const replayedOf = (outcome: string) =>
    receiver.spans.find((s) =>
      s.kind === SPAN_KIND_SERVER &&
      s.attributes["idempotency.outcome"] === outcome
    )?.attributes["idempotency.replayed"];
  await waitFor(
    "server spans with the outcomes executed and replayed",
    () =>
      replayedOf("executed") !== undefined &&
      replayedOf("replayed") !== undefined,
    BOUND_MS,
  );
  assert.equal(replayedOf("executed"), "false");
  assert.equal(replayedOf("replayed"), "true");
});
