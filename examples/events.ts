// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `onEvent`, as a whole server on 127.0.0.1:8000: a warning for store
 * errors and a counter per event type (a stand-in `logger` and
 * `metrics`).
 *
 *     deno run --allow-net examples/events.ts
 *
 * @module
 */
// deno-lint-ignore-file no-console
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";

const logger = { warn: (...data: unknown[]) => console.warn(...data) };
const counts = new Map<string, number>();
const metrics = {
  increment: (name: string) => counts.set(name, (counts.get(name) ?? 0) + 1),
};

const guarded = idempotency(handler, {
  scope: accountOf, // the account the request acts for, after authentication
  onEvent(event) {
    if (event.type === "store_error") logger.warn("idempotency store", event);
    metrics.increment(`idempotency.${event.type}`);
  },
});

Deno.serve({ hostname: "127.0.0.1", port: 8000 }, guarded);
