// Copyright 2026 the @idempotent/http authors. MIT license.
// Hono on Node behind the middleware: with `hono`, `@hono/node-server` and
// the package installed from npm, `node examples/hono_node.mjs` serves
// `POST /api/payments` on port 8000 (or PORT). tests/runtimes_test.ts bundles
// this file with `deno bundle` and runs it on Node over HTTP.
// deno-lint-ignore-file no-console
import process from "node:process";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { MemoryStore } from "@idempotent/http";
import { idempotent } from "@idempotent/http/hono";

// A stand-in for your authentication, which runs first: the account each API
// key acts for. The scope is that account's stable id, never the key itself.
const accounts = new Map([["sk_test_alice", "acct_1"]]);
const accountOf = (req) =>
  accounts.get(req.headers.get("authorization")?.replace(/^Bearer /, "")) ??
    "anonymous"; // a real API refuses unknown callers before this point

let next = 0;
const app = new Hono();
app.use(
  "/api/*",
  idempotent({ store: new MemoryStore(), scope: accountOf }),
);
app.post("/api/payments", async (c) => {
  const { amount } = await c.req.json();
  return c.json({ id: `pay_${++next}`, amount }, 201);
});

serve(
  {
    fetch: app.fetch,
    hostname: "127.0.0.1",
    port: Number(process.env.PORT ?? 8000),
  },
  (info) => console.log(`listening on http://127.0.0.1:${info.port}`),
);
