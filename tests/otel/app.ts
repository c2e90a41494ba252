// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The end-to-end test's app (tests/otel_e2e_test.ts), run under
 * `OTEL_DENO=true`: the middleware with the bridge on Deno's own meter
 * provider and spans, a new key and its replay sent to itself, then exit
 * (Deno exports what is left as the process ends).
 *
 * @module
 */

import { idempotency, MemoryStore } from "../../mod.ts";
import { idempotencyTelemetry } from "../../src/otel.ts";

const telemetry = idempotencyTelemetry();
const guarded = idempotency(() => new Response("ok", { status: 201 }), {
  scope: "global",
  store: telemetry.store(new MemoryStore(), "memory"),
  onEvent: telemetry.onEvent,
});
const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen() {} },
  (req) => guarded(req),
);
const url = `http://127.0.0.1:${server.addr.port}/payments`;
for (const key of ["e2e-1", "e2e-1"]) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "idempotency-key": key },
    body: "{}",
  });
  await res.body?.cancel();
  if (res.status !== 201) throw new Error(`status ${res.status}`);
}
await server.shutdown();
