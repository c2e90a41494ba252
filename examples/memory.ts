// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's MemoryStore snippet as a whole server, on 127.0.0.1:8000:
 *
 *     deno run --allow-net examples/memory.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency, MemoryStore } from "@idempotent/http";

const store = new MemoryStore({ maxEntries: 10_000, maxBytes: 64 << 20 });
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(handler, { store, scope: accountOf }),
);
