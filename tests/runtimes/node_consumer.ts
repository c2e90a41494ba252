// Copyright 2026 the @idempotent/http authors. MIT license.
// A Node user's file: type-checked by `tsc` with Node's types and no Deno
// types (tests/runtimes_test.ts). It imports every entry point that runs off
// Deno (`./kv` is Deno KV, Deno only) and uses their public types, as a
// Node user of the package's npm compatibility layer would.
import { createServer } from "node:http";
import {
  type FetchHandler,
  idempotency,
  type IdempotencyEvent,
  MemoryStore,
} from "@idempotent/http";
import { FailoverStore } from "@idempotent/http/failover";
import { idempotent } from "@idempotent/http/hono";
import { type PostgresSql, PostgresStore } from "@idempotent/http/postgres";
import { type RedisClientLike, RedisStore } from "@idempotent/http/redis";

const events: IdempotencyEvent[] = [];
const handler: FetchHandler = idempotency(
  () => new Response("charged", { status: 201 }),
  {
    scope: "global",
    store: new MemoryStore(),
    onEvent: (event) => events.push(event),
  },
);
const withEnv = idempotency(
  (_request: Request, env: { TOKEN: string }) => new Response(env.TOKEN),
  { scope: "global" },
);

export function stores(
  client: RedisClientLike,
  sql: PostgresSql,
): FailoverStore {
  return new FailoverStore({
    primary: new RedisStore({ client }),
    fallback: new PostgresStore({ sql }),
  });
}

export const middleware: ReturnType<typeof idempotent> = idempotent({
  scope: "global",
});

export function serve(): void {
  createServer((_req, res) => res.end()).close();
  void handler(new Request("http://localhost/"));
  void withEnv(new Request("http://localhost/"), { TOKEN: "t" });
}
