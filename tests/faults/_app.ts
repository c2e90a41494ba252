// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One app process of the two-process case: a `Deno.serve` on a free port,
 * guarded by a RedisStore, that prints `listening <port>` when it listens.
 * Every execution is reported to the test's control server (the ledger,
 * outside this process, so it survives a SIGKILL) BEFORE the handler
 * answers, and the handler answers only when the control server lets it:
 * the test decides at which point a process is stopped or killed.
 *
 *     deno run --allow-net --allow-env --allow-read tests/faults/_app.ts REDIS_URL PREFIX CONTROL_URL LEASE_MS
 *
 * @module
 */
import { createClient } from "redis";
import { RedisStore } from "../../src/stores/redis.ts";
import { serveApp } from "./_load.ts";

const [redisUrl, prefix, control, lease] = Deno.args;
const client = createClient({
  url: redisUrl!,
  socket: { reconnectStrategy: () => 20 },
});
client.on("error", () => {});
await client.connect();
const store = new RedisStore({ client, prefix: prefix!, timeoutMs: 500 });

function tell(path: string, params: Record<string, string>): Promise<string> {
  const query = new URLSearchParams({ ...params, pid: String(Deno.pid) });
  return fetch(`${control}${path}?${query}`, { method: "POST" }).then((r) =>
    r.text()
  );
}

// The ledger first; its answer comes when the test lets this run go on.
serveApp((key, body) => tell("/ran", { key, body }), {
  scope: "global",
  store,
  lease: Number(lease),
  onEvent(event) {
    if (event.type === "completed") {
      tell("/event", { type: event.type, outcome: event.outcome }).catch(
        () => {},
      );
    }
  },
});
