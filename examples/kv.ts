// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's KvStore snippet as a whole server, on 127.0.0.1:8000, with its
 * records in `./idempotency.db`:
 *
 *     deno run --allow-net --allow-read --allow-write --unstable-kv examples/kv.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { KvStore } from "@idempotent/http/kv";

const kv = await Deno.openKv("./idempotency.db"); // Deno.openKv() on Deno Deploy
const store = new KvStore({ kv }); // timeoutMs: 10_000 by default
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(handler, { store, scope: accountOf }),
);
