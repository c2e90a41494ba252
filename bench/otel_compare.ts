// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the OpenTelemetry bridge (src/otel.ts) costs a request in process, on
 * the MemoryStore: a replay and a new key, without the bridge, with it on
 * the global meter provider (a no-op unless one is registered), and with it
 * on an SDK `MeterProvider` (every instrument recording, an in-memory
 * reader). No span is active (the attributes are skipped): under
 * `OTEL_DENO=true` Deno's provider and spans are its own to measure.
 *
 * Rounds alternate the cases (`interleaved`), so load from anything else on
 * the machine falls on all alike; each round times `batch` sequential
 * requests of a case, by wall and by CPU time (`process.cpuUsage()`), and
 * the report gives the medians over the rounds as ratios to no bridge.
 *
 * ```sh
 * deno run --allow-env --allow-read bench/otel_compare.ts [rounds] [batch]
 * ```
 *
 * @module
 */

import process from "node:process";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { idempotency, MemoryStore } from "../mod.ts";
import { idempotencyTelemetry } from "../src/otel.ts";
import { handler, payload } from "./_app.ts";
import { interleaved, median, ratio } from "./_measure.ts";

const rounds = Number(Deno.args[0] ?? 40);
const batch = Number(Deno.args[1] ?? 2_000);

class Unexported extends MetricReader {
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

const meterProvider = new MeterProvider({ readers: [new Unexported()] });

type Guarded = (req: Request) => Response | Promise<Response>;

function guard(bridge: "none" | "noop" | "sdk"): Guarded {
  const store = new MemoryStore({ maxEntries: 10_000_000, maxBytes: 4e9 });
  if (bridge === "none") {
    return idempotency(handler, { scope: "global", store });
  }
  const telemetry = idempotencyTelemetry(
    bridge === "sdk" ? { meterProvider } : {},
  );
  return idempotency(handler, {
    scope: "global",
    store: telemetry.store(store, "memory"),
    onEvent: telemetry.onEvent,
  });
}

function request(key: string): Request {
  return new Request("http://localhost/payments", {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: payload,
  });
}

const bridges = ["none", "noop", "sdk"] as const;
const kinds = ["replay", "new key"] as const;
const cases = bridges.flatMap((bridge) =>
  kinds.map((kind) => ({ bridge, kind, guarded: guard(bridge) }))
);
const wall = new Map<string, number[]>();
const cpu = new Map<string, number[]>();
let fresh = 0;
for (const c of cases) {
  await (await c.guarded(request("replayed"))).arrayBuffer();
  wall.set(`${c.bridge} ${c.kind}`, []);
  cpu.set(`${c.bridge} ${c.kind}`, []);
}

await interleaved(cases, rounds + 2, async (c, round) => {
  const key = () => c.kind === "replay" ? "replayed" : `k${fresh++}`;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < batch; i++) {
    await (await c.guarded(request(key()))).arrayBuffer();
  }
  const ms = performance.now() - t0;
  const used = process.cpuUsage(cpu0);
  if (round < 2) return; // warm-up rounds
  wall.get(`${c.bridge} ${c.kind}`)!.push((ms * 1000) / batch);
  cpu.get(`${c.bridge} ${c.kind}`)!.push((used.user + used.system) / batch);
});

const rows = [];
for (const kind of kinds) {
  const baseWall = median(wall.get(`none ${kind}`)!);
  const baseCpu = median(cpu.get(`none ${kind}`)!);
  for (const bridge of bridges) {
    const w = median(wall.get(`${bridge} ${kind}`)!);
    const c = median(cpu.get(`${bridge} ${kind}`)!);
    rows.push({
      case: `${kind}, bridge ${bridge}`,
      "wall µs": +w.toFixed(1),
      "wall ratio": ratio(w, baseWall),
      "cpu µs": +c.toFixed(1),
      "cpu ratio": ratio(c, baseCpu),
    });
  }
}
// deno-lint-ignore no-console
console.table(rows);
await meterProvider.shutdown();
