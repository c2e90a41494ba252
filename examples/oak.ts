// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Oak behind the middleware: `deno run --allow-net --allow-env examples/oak.ts`
 * serves `POST /api/payments` on port 8000 (or `PORT`). The middleware wraps
 * the fetch handler Oak exposes (`app.handle`), so a retry is answered before
 * Oak's routing runs. tests/runtimes_test.ts runs this file over HTTP.
 *
 * @module
 */
// deno-lint-ignore-file no-console
import { Application, Router } from "@oakserver/oak";
import { idempotency, MemoryStore } from "@idempotent/http";
import { accountOf } from "./_payments.ts";

let next = 0;
const router = new Router();
router.post("/api/payments", async (ctx) => {
  const { amount } = await ctx.request.body.json();
  ctx.response.status = 201;
  ctx.response.body = { id: `pay_${++next}`, amount };
});
const app = new Application();
app.use(router.routes(), router.allowedMethods());

// npm's Oak is its Node build: `app.handle` answers undici's `Response`, which
// `Deno.serve` refuses, so the answer is rebuilt as the platform's (same
// status, headers and body stream). Oak from JSR answers Deno's own.
async function oak(request: Request): Promise<Response> {
  const answer = await app.handle(request as never);
  if (!answer) return new Response(null, { status: 404 });
  return new Response(answer.body, {
    status: answer.status,
    statusText: answer.statusText,
    headers: [...answer.headers],
  });
}

// Scoped by the account the request acts for, resolved after authentication.
const handler = idempotency(oak, {
  store: new MemoryStore(),
  scope: accountOf,
});

Deno.serve({
  hostname: "127.0.0.1",
  port: Number(Deno.env.get("PORT") ?? 8000),
  onListen: ({ port }) => console.log(`listening on http://127.0.0.1:${port}`),
}, handler);
