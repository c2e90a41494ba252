// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `waitForInFlight` across processes: three `Deno.serve` app processes
 * (`tests/_support/wait_app.ts`) share one Redis, or one PostgreSQL table;
 * the first request runs on one, its duplicates wait on the others. Each
 * handler run is held by this test until it opens the run's gate, and every
 * event is posted back here, so the test waits for states, not durations.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  integrationTest,
  POSTGRES_IGNORE,
  postgresStore,
  REDIS_IGNORE,
  REDIS_URL,
  uniquePrefix,
} from "./_support/services.ts";
import { DATABASE_URL } from "./_support/services.ts";
import { deleteRedisKeys } from "./_support/redis.ts";
import { deferred, waitFor } from "./_support/time.ts";
import { spawnApps } from "./_support/http.ts";

interface Run {
  port: string;
  body: string;
  gate: ReturnType<typeof deferred<{ status: number; text: string }>>;
}

interface Seen {
  port: string;
  type: string;
  detail: string;
}

/** The test's control server: holds handler runs, collects events. */
function control() {
  const runs: Run[] = [];
  const events: Seen[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      const url = new URL(req.url);
      const port = url.searchParams.get("port")!;
      if (url.pathname === "/run") {
        const run: Run = { port, body: await req.text(), gate: deferred() };
        runs.push(run);
        return Response.json(await run.gate.promise);
      }
      events.push({
        port,
        type: url.searchParams.get("type")!,
        detail: url.searchParams.get("detail")!,
      });
      return new Response("seen");
    },
  );
  return {
    runs,
    events,
    url: `http://127.0.0.1:${server.addr.port}`,
    count: (port: number, type: string, detail?: string) =>
      events.filter((e) =>
        e.port === String(port) && e.type === type &&
        (detail === undefined || e.detail === detail)
      ).length,
    shutdown: () => server.shutdown(),
  };
}

/** Spawns one app per wait bound; they share the store at `where`. */
async function apps(
  kind: "redis" | "postgres",
  where: string,
  controlUrl: string,
  waits: number[],
) {
  return await spawnApps(
    new URL("./_support/wait_app.ts", import.meta.url),
    waits.length,
    (port, i) => [String(port), kind, where, controlUrl, String(waits[i])],
    { REDIS_URL, DATABASE_URL },
    // The waiters read request.signal; this keeps Deno.serve quiet about it.
    ["--unstable-no-legacy-abort"],
  );
}

function send(port: number, key: string, signal?: AbortSignal) {
  return fetch(`http://127.0.0.1:${port}/payments`, {
    method: "POST",
    headers: { "idempotency-key": key },
    body: `{"key":"${key}"}`,
    ...(signal ? { signal } : {}),
  });
}

/** The cases, on apps A and B (waiting a minute) and C (waiting 100 ms). */
async function waitingAcrossProcesses(
  kind: "redis" | "postgres",
  where: string,
): Promise<void> {
  const ctl = control();
  const { ports: [a, b, c], stop } = await apps(kind, where, ctl.url, [
    60_000,
    60_000,
    100,
  ]);
  try {
    // Woken: duplicates on B get A's response.
    {
      const first = send(a!, "woken");
      await waitFor("the first run", () => ctl.runs.length === 1);
      const duplicates = [1, 2, 3].map(() => send(b!, "woken"));
      await waitFor(
        "three waiters on B",
        () => ctl.count(b!, "waiting", "poll") === 3,
      );
      ctl.runs[0]!.gate.resolve({ status: 201, text: "paid once" });
      assert.equal(await (await first).text(), "paid once");
      for (const duplicate of await Promise.all(duplicates)) {
        assert.equal(duplicate.status, 201);
        assert.equal(duplicate.headers.get("idempotent-replayed"), "true");
        assert.equal(await duplicate.text(), "paid once");
      }
      assert.equal(ctl.runs.length, 1);
      await waitFor("three woken on B", () => ctl.count(b!, "woken") === 3);
    }
    // The first request fails: exactly one waiter runs, the others replay it.
    {
      const first = send(a!, "failed");
      await waitFor("the first run", () => ctl.runs.length === 2);
      const waiters = [
        send(a!, "failed"),
        send(a!, "failed"),
        send(b!, "failed"),
        send(b!, "failed"),
        send(b!, "failed"),
      ];
      let settled = 0;
      for (const waiter of waiters) waiter.then(() => settled++);
      await waitFor(
        "two waiters on A",
        () => ctl.count(a!, "waiting", "owner") === 2,
      );
      await waitFor(
        "three more on B",
        () => ctl.count(b!, "waiting", "poll") === 6,
      );
      ctl.runs[1]!.gate.resolve({ status: 500, text: "provider down" });
      assert.equal((await first).status, 500);
      await (await first).body?.cancel();
      await waitFor("the second run", () => ctl.runs.length === 3);
      assert.equal(settled, 0);
      ctl.runs[2]!.gate.resolve({ status: 201, text: "paid on retry" });
      const answers = await Promise.all(waiters);
      const texts = await Promise.all(answers.map((r) => r.text()));
      assert.deepEqual(texts, Array(5).fill("paid on retry"));
      assert.equal(
        answers.filter((r) => r.headers.get("idempotent-replayed") === "true")
          .length,
        4,
      );
      assert.equal(ctl.runs.length, 3);
    }
    // Timed out on C, and a client that leaves on B.
    {
      const first = send(a!, "held");
      await waitFor("the first run", () => ctl.runs.length === 4);
      const late = await send(c!, "held");
      assert.equal(late.status, 409);
      assert.ok(Number(late.headers.get("retry-after")) >= 1);
      await late.body?.cancel();
      await waitFor(
        "the timeout on C",
        () => ctl.count(c!, "wait_ended", "timed_out") === 1,
      );
      const client = new AbortController();
      const leaving = send(b!, "held", client.signal);
      await waitFor(
        "the waiter on B",
        () => ctl.count(b!, "waiting", "poll") === 7,
      );
      client.abort();
      await assert.rejects(leaving);
      await waitFor(
        "B to notice",
        () => ctl.count(b!, "wait_ended", "gone") === 1,
      );
      ctl.runs[3]!.gate.resolve({ status: 201, text: "held" });
      assert.equal(await (await first).text(), "held");
      assert.equal(ctl.runs.length, 4);
    }
  } finally {
    for (const run of ctl.runs) run.gate.resolve({ status: 500, text: "end" });
    await stop();
    await ctl.shutdown();
  }
}

integrationTest(
  "idempotency() with waitForInFlight on RedisStore answers duplicates waiting in other processes",
  REDIS_IGNORE,
  async () => {
    const prefix = `${uniquePrefix("wait")}:`;
    try {
      await waitingAcrossProcesses("redis", prefix);
    } finally {
      await deleteRedisKeys(prefix);
    }
  },
);

integrationTest(
  "idempotency() with waitForInFlight on PostgresStore answers duplicates waiting in other processes",
  POSTGRES_IGNORE,
  async () => {
    const pg = await postgresStore("wait", { max: 1 });
    try {
      await waitingAcrossProcesses("postgres", `${pg.schema}.keys`);
    } finally {
      await pg.drop();
    }
  },
);
