// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's "Shutdown" as a whole server, on 127.0.0.1:8000: on SIGTERM
 * it stops taking requests, flushes the writes still retried in the
 * background, and exits.
 *
 *     deno run --allow-net examples/shutdown.ts
 *
 * @module
 */
import { accountOf, handler as app } from "./_payments.ts";
import { drainCompletions, idempotency, MemoryStore } from "@idempotent/http";

const store = new MemoryStore();

// Scoped by the account the request acts for, resolved after authentication.
const handler = idempotency(app, { store, scope: accountOf });
const server = Deno.serve({ hostname: "127.0.0.1", port: 8000 }, handler);
Deno.addSignalListener("SIGTERM", async () => {
  await server.shutdown();
  await drainCompletions(handler); // resolves at once when none is pending
  Deno.exit(0);
});
