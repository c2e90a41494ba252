// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the transactional crash tests of PostgreSQL, MySQL and SQLite share:
 * the control server where app processes report the
 * points they reach and wait there for the test's word, a POST of a key, and
 * `settle`, which sends a key until it is answered.
 *
 * @module
 */

import { slotOf } from "../../src/fingerprint.ts";
import assert from "node:assert/strict";
import { type AppProcess, ControlServer } from "../faults/_servers.ts";
import { waitFor } from "./time.ts";

export type Point = "inserted" | "captured" | "committed";

/** The test's control server: where the apps report their points. */
export class Control extends ControlServer {
  readonly reached: {
    point: string;
    key: string;
    pid: number;
    outcome: string;
  }[] = [];
  /** Held points, by `point key pid`: the app waits there until resolved. */
  readonly holds = new Map<string, PromiseWithResolvers<void>>();

  protected async answer(q: (name: string) => string): Promise<Response> {
    const point = q("point");
    const key = q("key");
    const pid = Number(q("pid"));
    this.reached.push({ point, key, pid, outcome: q("outcome") });
    const hold = this.holds.get(`${point} ${key} ${pid}`);
    if (hold) await hold.promise;
    return new Response("go");
  }

  /** Holds `pid` at `point` for `key` until the returned gate is resolved. */
  hold(point: Point, key: string, pid: number): PromiseWithResolvers<void> {
    const gate = Promise.withResolvers<void>();
    this.holds.set(`${point} ${key} ${pid}`, gate);
    return gate;
  }

  /** Resolves once `pid` reached `point` (for `committed`, `key` is the slot). */
  async reachedBy(point: Point, key: string, pid: number): Promise<void> {
    const name = point === "committed" ? slotOf("", key) : key;
    await waitFor(
      `${point} of ${key} by ${pid}`,
      () =>
        this.reached.some((r) =>
          r.point === point && r.key === name && r.pid === pid
        ),
    );
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const gate of this.holds.values()) gate.resolve();
    await this.server.shutdown();
  }
}

export function post(port: number, key: string): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/orders`, {
    method: "POST",
    headers: { "idempotency-key": key },
    body: "{}",
  });
}

/**
 * Sends `key` until the answer is neither 409 (the lease of a dead owner
 * has to run out first) nor, when `busy` allows it, 503 (another process
 * held the write lock past busy_timeout): a wait for a state, polled.
 */
export async function settle(
  port: number,
  key: string,
  busy = false,
): Promise<Response> {
  let last: Response | undefined;
  await waitFor(`an answer for ${key} other than 409`, async () => {
    last = await post(port, key);
    if (last.status !== 409 && !(busy && last.status === 503)) return true;
    await last.body?.cancel();
    return false;
  });
  return last!;
}

/**
 * A zombie owner resumed after a takeover: `zombie` is frozen right after its
 * INSERT, the lease runs out on the database's clock, `taker`'s retry takes
 * the slot over and commits; the zombie, resumed, rolls back (its write is
 * `lost`, its client gets 409) and the key replays the taker's answer, with
 * the taker's effect row alone (`effectsOf` reads the pids of a key's rows).
 */
export async function zombieTakeover(
  control: Control,
  zombie: AppProcess,
  taker: AppProcess,
  effectsOf: (key: string) => Promise<number[]>,
): Promise<void> {
  const a = zombie.child.pid;
  const b = taker.child.pid;
  const key = "zombie";
  const gate = control.hold("inserted", key, a);
  const zombieAnswer = post(await zombie.port, key);
  await control.reachedBy("inserted", key, a);
  zombie.pause();
  const taken = await settle(await taker.port, key);
  assert.equal(taken.status, 201);
  assert.equal(await taken.text(), `${key} by ${b}`);

  gate.resolve();
  zombie.resume();
  const answer = await zombieAnswer;
  assert.equal(answer.status, 409);
  await answer.body?.cancel();
  await control.reachedBy("committed", key, a);
  assert.ok(
    control.reached.some((r) =>
      r.point === "committed" && r.pid === a && r.outcome === "lost"
    ),
  );
  assert.deepEqual(await effectsOf(key), [b]);
  const replay = await post(await zombie.port, key);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(await replay.text(), `${key} by ${b}`);
}
