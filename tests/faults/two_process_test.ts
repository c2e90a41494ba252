// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Case 4 of the fault-injection suite: two `Deno.serve` processes
 * (tests/faults/_app.ts) sharing a RedisStore on a private redis-server,
 * with a lease of one second. The ledger is the test's own control server:
 * each process reports an execution there before it answers, and waits
 * there for the test's word, so the test stops or kills a process at a
 * known point, never after an assumed sleep.
 *
 * Allowed, and counted as such:
 * - SIGKILL after the effect and before the completion is the documented
 *   crash window: once the lease has run out a retry runs the key again (one
 *   allowed re-run). The killed process's client gets no answer (its
 *   connection is reset), as with any crash.
 * - A process SIGSTOPped mid-handler past its lease may be taken over: the
 *   other process runs the key again (one allowed re-run). When the zombie
 *   resumes, its late completion must be `lost` (fenced out), and its client
 *   still gets the zombie handler's exact bytes; every later retry replays
 *   the taker's answer.
 * Everything else is a failure: a second execution of any other key, an
 * answer that is not the handler's bytes or a problem, a key that does not
 * settle into a replay.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  redisServerIgnore,
  startRedisServer,
  testName,
} from "../_support/services.ts";
import {
  assertNoHarm,
  duplicates,
  judge,
  Ledger,
  load,
  report,
  type Send,
  sender,
  settle,
  tally,
} from "./_load.ts";
import { waitFor } from "../_support/time.ts";
import { AppProcess, ControlServer } from "./_servers.ts";

const ignore = await redisServerIgnore();
const LEASE = 1000;

/** The ledger and the gates: the test's control server. */
class Control extends ControlServer {
  readonly ledger = new Ledger();
  readonly ran: { key: string; pid: number }[] = [];
  readonly events: { type: string; outcome: string; pid: number }[] = [];
  /** Keys whose first execution waits until the test releases it. */
  readonly gates = new Map<string, PromiseWithResolvers<void>>();

  protected async answer(
    q: (name: string) => string,
    path: string,
  ): Promise<Response> {
    const pid = Number(q("pid"));
    if (path === "/event") {
      this.events.push({ type: q("type"), outcome: q("outcome"), pid });
      return new Response("ok");
    }
    const key = q("key");
    const first = this.ledger.of(key).length === 0;
    this.ledger.record(key, 201, q("body"));
    this.ran.push({ key, pid });
    const gate = this.gates.get(key);
    if (first && gate) await gate.promise;
    return new Response("go");
  }

  ranBy(key: string, pid: number): boolean {
    return this.ran.some((r) => r.key === key && r.pid === pid);
  }
}

Deno.test({
  name: testName(
    "faults: two Deno.serve processes on one RedisStore, one SIGSTOPped past its lease, one SIGKILLed mid-handler",
    ignore,
  ),
  ignore: ignore !== false,
  async fn() {
    await using redis = await startRedisServer();
    const control = new Control();
    const script = new URL("./_app.ts", import.meta.url).pathname;
    const spawn = () =>
      new AppProcess(
        script,
        [redis.url, "faults2p:", control.url, String(LEASE)],
        {},
      );
    const a = spawn();
    const b = spawn();
    try {
      const [portA, portB] = await Promise.all([a.port, b.port]);
      const toA = sender(portA);
      const toB = sender(portB);
      const both: Send = (() => {
        let i = 0;
        return (key: string) => (i++ % 2 === 0 ? toA : toB)(key);
      })();
      const { ledger } = control;
      const seen = tally();

      // 1. Duplicates spread over both processes: each key runs once.
      const keys = Array.from({ length: 60 }, (_, i) => `two-k${i}`);
      await load(both, ledger, { keys, duplicates: 2, concurrency: 8 }, seen);

      // 2. A zombie: A is frozen mid-handler, past its lease.
      const zombieKey = "two-zombie";
      const zombieGate = Promise.withResolvers<void>();
      control.gates.set(zombieKey, zombieGate);
      const zombieAnswer = toA(zombieKey);
      await waitFor(
        "A to run the zombie key",
        () => control.ranBy(zombieKey, a.child.pid),
      );
      a.pause();
      // B answers 409 while A's lease lasts, then takes the key over.
      let takeover: Response | undefined;
      await waitFor("B to take the key over", async () => {
        const response = await toB(zombieKey);
        if (response.status === 409) {
          await response.body?.cancel();
          return false;
        }
        takeover = response;
        return true;
      });
      assert.equal(await judge(ledger, zombieKey, takeover!, seen), "live");
      zombieGate.resolve();
      a.resume();
      const zombie = await zombieAnswer;
      assert.equal(zombie.headers.get("idempotent-replayed"), null);
      assert.equal(await judge(ledger, zombieKey, zombie, seen), "live");
      await waitFor(
        "A's late completion to be reported",
        () =>
          control.events.some((e) => e.pid === a.child.pid && e.outcome !== ""),
      );
      const zombieOutcomes = control.events
        .filter((e) => e.pid === a.child.pid && e.type === "completed")
        .map((e) => e.outcome);
      assert.ok(
        zombieOutcomes.includes("lost"),
        `the zombie's completion: ${zombieOutcomes.join()}`,
      );
      // Every retry now replays what B stored.
      const takerBody = ledger.of(zombieKey).find((r) =>
        r.body.includes(` by ${b.child.pid} `)
      )?.body;
      for (const send of [toA, toB]) {
        const retry = await send(zombieKey);
        assert.equal(retry.headers.get("idempotent-replayed"), "true");
        assert.equal(await retry.text(), takerBody);
      }

      // 3. A crash: A is killed after the effect, before the completion.
      const crashKey = "two-crash";
      const crashGate = Promise.withResolvers<void>();
      control.gates.set(crashKey, crashGate);
      const crashAnswer = toA(crashKey).then(
        () => "answered",
        () => "reset",
      );
      await waitFor(
        "A to run the crash key",
        () => control.ranBy(crashKey, a.child.pid),
      );
      await a.kill();
      crashGate.resolve();
      assert.equal(await crashAnswer, "reset");
      // After the lease, B runs it again: the documented crash window.
      const settledCrash = await settle(toB, ledger, [crashKey], 20_000, seen);
      assert.deepEqual(settledCrash.stuck, []);

      // 4. B settles every key of the load into a replay.
      const settled = await settle(toB, ledger, keys, 20_000, seen);
      const allowed = (key: string) =>
        key === zombieKey || key === crashKey ? 2 : 1;
      const dup = duplicates(ledger, allowed);
      report("two processes", {
        requests: seen.requests,
        faults: { sigstop: 1, sigkill: 1 },
        executions: ledger.total,
        allowedReruns: {
          takeoverOfZombie: ledger.of(zombieKey).length - 1,
          crashWindow: ledger.of(crashKey).length - 1,
        },
        duplicates: dup.count,
        altered: seen.altered.length,
        stuck: settled.stuck.length,
        statuses: seen.statuses,
      });
      assert.equal(ledger.of(zombieKey).length, 2);
      assert.equal(ledger.of(crashKey).length, 2);
      assertNoHarm(dup, seen, settled);
    } finally {
      for (const gate of control.gates.values()) gate.resolve();
      await a.kill();
      await b.kill();
      await control.server.shutdown();
    }
  },
});
