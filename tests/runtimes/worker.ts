// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The networked stores' smoke run on workerd (bundled whole by
 * tests/runtimes_test.ts, npm drivers included, and run with
 * `nodejs_compat`): `GET /stores` answers the protocol checks on RedisStore
 * (node-redis, ioredis) and PostgresStore (postgres.js), at the services in
 * the `REDIS_URL` and `DATABASE_URL` bindings, under keys and a table named
 * after the `PREFIX` binding.
 *
 * @module
 */
import { storeCases } from "./stores.ts";

/** The worker's bindings (text bindings in the capnp config). */
export interface Env {
  /** Where Redis listens. */
  REDIS_URL: string;
  /** The PostgreSQL database. */
  DATABASE_URL: string;
  /** Unique to this run. */
  PREFIX: string;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    if (new URL(request.url).pathname !== "/stores") {
      return new Response("not found", { status: 404 });
    }
    try {
      return Response.json(
        await storeCases(env.REDIS_URL, env.DATABASE_URL, env.PREFIX),
      );
    } catch (error) {
      return new Response(String((error as Error)?.stack ?? error), {
        status: 500,
      });
    }
  },
};
