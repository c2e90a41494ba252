// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's Hono snippet as a whole server: `POST /api/payments` on port
 * 8000.
 *
 *     deno run --allow-net examples/hono.ts
 *
 * @module
 */
import { charge } from "./_payments.ts";
import { MemoryStore } from "@idempotent/http";

const store = new MemoryStore(); // or any other store

// The README's snippet, from here on.
import { Hono } from "hono";
import { idempotent } from "@idempotent/http/hono";

const app = new Hono();
app.use("/api/*", idempotent({ store })); // GET and keyless requests pass straight through
app.post("/api/payments", async (c) => {
  const { amount } = await c.req.json(); // the body is still readable here
  return c.json(await charge(amount), 201);
});

Deno.serve({ hostname: "127.0.0.1", port: 8000 }, app.fetch);
