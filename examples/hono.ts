// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The Hono middleware (`@idempotent/http/hono`) as a whole server:
 * `POST /api/payments` on 127.0.0.1:8000. Register it before any middleware
 * that reads the body.
 *
 *     deno run --allow-net examples/hono.ts
 *
 * @module
 */
import { accountOf, charge } from "./_payments.ts";
import { MemoryStore } from "@idempotent/http";
import { idempotent } from "@idempotent/http/hono";
import { Hono } from "hono";

const store = new MemoryStore(); // or any other store

const app = new Hono();
// Scoped by the account the request acts for (`accountOf` gets `c.req.raw`),
// resolved after authentication. GET and keyless requests pass straight
// through.
app.use("/api/*", idempotent({ store, scope: accountOf }));
app.post("/api/payments", async (c) => {
  const { amount } = await c.req.json(); // the body is still readable here
  return c.json(await charge(amount), 201);
});

Deno.serve({ hostname: "127.0.0.1", port: 8000 }, app.fetch);
