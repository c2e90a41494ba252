// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Two app processes on loopback sharing one Redis, sent concurrent duplicate
 * requests spread across both: every key runs exactly once, counted by the
 * test itself, outside the servers.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  REDIS_IGNORE,
  REDIS_URL,
  testName,
  uniquePrefix,
} from "../_support/services.ts";
import { deleteRedisKeys } from "../_support/redis.ts";
import { spawnApps } from "../_support/http.ts";

Deno.test({
  name: testName(
    "idempotency() on RedisStore runs each key once across two processes",
    REDIS_IGNORE,
  ),
  ignore: REDIS_IGNORE !== false,
  async fn() {
    const executions = new Map<string, string[]>();
    const counter = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      onListen() {},
    }, (req) => {
      const url = new URL(req.url);
      const order = url.searchParams.get("order")!;
      executions.set(order, [
        ...executions.get(order) ?? [],
        url.searchParams.get("port")!,
      ]);
      return new Response("counted");
    });
    const counterUrl = `http://127.0.0.1:${
      (counter.addr as Deno.NetAddr).port
    }/count`;
    const prefix = `${uniquePrefix("twoproc")}:`;
    let stop = () => Promise.resolve();
    try {
      const apps = await spawnApps(
        new URL("../_support/redis_app.ts", import.meta.url),
        2,
        (port) => [String(port), prefix, counterUrl],
        { REDIS_URL },
      );
      stop = apps.stop;
      const { ports } = apps;
      const orders = Array.from({ length: 8 }, (_, i) => `order-${i}`);
      const send = (order: string, i: number) =>
        fetch(`http://127.0.0.1:${ports[i % 2]}/payments`, {
          method: "POST",
          headers: {
            "idempotency-key": `key-${order}`,
            "content-type": "application/json",
          },
          body: JSON.stringify({ order }),
        });
      const answers = await Promise.all(
        orders.flatMap((order) =>
          Array.from({ length: 10 }, (_, i) => send(order, i))
        ),
      );
      const statuses = answers.map((r) => r.status);
      await Promise.all(answers.map((r) => r.arrayBuffer()));
      assert.ok(statuses.every((s) => s === 201 || s === 409), statuses.join());
      for (const order of orders) {
        assert.equal(
          executions.get(order)?.length,
          1,
          `${order} ran ${executions.get(order)?.length ?? 0} times`,
        );
        // Once settled, both processes replay the same answer.
        const [a, b] = await Promise.all([send(order, 0), send(order, 1)]);
        const [textA, textB] = [await a.text(), await b.text()];
        assert.equal(a.headers.get("idempotent-replayed"), "true");
        assert.equal(textA, textB);
      }
    } finally {
      await stop();
      await counter.shutdown();
      await deleteRedisKeys(prefix);
    }
  },
});
