// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's smoke run on workerd (bundled whole by tests/runtimes_test.ts,
 * node-redis included, and run with `nodejs_compat`): `GET /redis` answers
 * the protocol checks on RedisStore over node-redis, at the Redis in the
 * `REDIS_URL` binding, under keys that start with the `PREFIX` binding,
 * removed afterwards.
 *
 * @module
 */
import { createClient } from "redis";
import { RedisStore } from "@idempotent/http/redis";
import { protocolCases } from "./smoke.ts";

/** The worker's bindings (text bindings in the capnp config). */
export interface Env {
  /** Where Redis listens. */
  REDIS_URL: string;
  /** What this run's keys start with. */
  PREFIX: string;
}

async function redisCases(env: Env): Promise<Response> {
  const client = await createClient({ url: env.REDIS_URL }).connect();
  const prefix = `${env.PREFIX}:workerd:`;
  try {
    const store = new RedisStore({ client, prefix });
    return Response.json(await protocolCases("RedisStore (node-redis)", store));
  } finally {
    for await (const keys of client.scanIterator({ MATCH: `${prefix}*` })) {
      if (keys.length > 0) await client.del(keys);
    }
    client.destroy();
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url);
    try {
      if (pathname === "/redis") return await redisCases(env);
      return new Response("not found", { status: 404 });
    } catch (error) {
      return new Response(String((error as Error)?.stack ?? error), {
        status: 500,
      });
    }
  },
};
