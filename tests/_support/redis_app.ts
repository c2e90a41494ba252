// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One instance of a payments app on RedisStore, for the two-process test:
 * every execution is reported to a counter the test owns, outside the
 * servers.
 *
 *     deno run --allow-net --allow-env --allow-read tests/_support/redis_app.ts PORT PREFIX COUNTER_URL
 *
 * @module
 */
import { createClient } from "redis";
import { idempotency } from "../../mod.ts";
import { RedisStore } from "../../src/stores/redis.ts";

const [port, prefix, counter] = Deno.args;
const client = await createClient({
  url: Deno.env.get("REDIS_URL") ?? "redis://127.0.0.1:6379",
}).connect();
const store = new RedisStore({ client, prefix: prefix! });

const server = Deno.serve(
  { hostname: "127.0.0.1", port: Number(port), onListen() {} },
  idempotency(async (req) => {
    const { order } = await req.json();
    await (await fetch(`${counter}?order=${order}&port=${port}`, {
      method: "POST",
    })).body?.cancel();
    await new Promise((r) => setTimeout(r, 40)); // the payment provider
    return Response.json({ order, servedBy: port, id: crypto.randomUUID() }, {
      status: 201,
    });
  }, { scope: "global", store }),
);

Deno.addSignalListener("SIGTERM", async () => {
  await server.shutdown();
  await client.quit();
  Deno.exit(0);
});
