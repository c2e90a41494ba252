// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Random interleavings of requests over a few keys, scopes and bodies, with
 * handlers that succeed, fail, throw, stream, overflow the cap or break
 * mid-body, checked against what the contract promises:
 *
 * - per (scope, key), handler runs never overlap, and none starts after a
 *   run whose response was cacheable;
 * - every replay equals that run's live response (or its status with an
 *   empty body, when the body was not recorded);
 * - every answer is the handler's own, or one of the documented statuses.
 *
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { idempotency } from "../mod.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { deferred } from "./_support/time.ts";
import { pattern } from "./_support/bytes.ts";

const CAP = 64;
type Behavior =
  | "ok"
  | "created"
  | "fail"
  | "throw"
  | "stream"
  | "big"
  | "broken";
const behaviors: Behavior[] = [
  "ok",
  "created",
  "fail",
  "throw",
  "stream",
  "big",
  "broken",
];
const STATUS: Record<Behavior, number> = {
  ok: 200,
  created: 201,
  fail: 500,
  throw: 0,
  stream: 200,
  big: 200,
  broken: 202,
};

type Command =
  | {
    op: "start";
    key: number;
    scope: number;
    body: number;
    behavior: Behavior;
  }
  | { op: "finish"; which: number };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc.record({
    op: fc.constant("start" as const),
    key: fc.integer({ min: 0, max: 2 }),
    scope: fc.integer({ min: 0, max: 1 }),
    body: fc.integer({ min: 0, max: 1 }),
    behavior: fc.constantFrom(...behaviors),
  }),
  fc.record({ op: fc.constant("finish" as const), which: fc.nat() }),
);

function liveBody(run: number, behavior: Behavior): Uint8Array<ArrayBuffer> {
  const size = behavior === "big" ? CAP * 3 : 10 + run % 20;
  const bytes = pattern(size, run + 1);
  bytes[0] = run; // tells runs apart
  return bytes;
}

function respond(run: number, behavior: Behavior): Response {
  const body = liveBody(run, behavior);
  switch (behavior) {
    case "throw":
      throw new Error(`run ${run} threw`);
    case "stream":
    case "big":
      return new Response(chunks([body.subarray(0, 5), body.subarray(5)]), {
        status: STATUS[behavior],
      });
    case "broken":
      return new Response(
        chunks([body.subarray(0, 5)], new Error("broken body")),
        { status: STATUS[behavior] },
      );
    default:
      return new Response(body, {
        status: STATUS[behavior],
        headers: { "x-run": String(run) },
      });
  }
}

function chunks(
  parts: Uint8Array<ArrayBuffer>[],
  error?: Error,
): ReadableStream<Uint8Array<ArrayBuffer>> {
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      const part = parts[i++];
      if (part) controller.enqueue(part);
      else if (error) controller.error(error);
      else controller.close();
    },
  }, { highWaterMark: 0 });
}

interface Run {
  run: number;
  slot: string;
  behavior: Behavior;
  cacheable: boolean;
}

Deno.test("idempotency() keeps its promises over random interleavings of requests", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(commandArb, { minLength: 1, maxLength: 40 }),
      async (commands) => {
        const runs: Run[] = [];
        const active = new Map<string, number>(); // slot -> runs in progress
        const recorded = new Map<string, Run>(); // slot -> the run whose response is cacheable
        const gates: { open: () => void }[] = [];
        const pending: { done: Promise<void> }[] = [];

        const guarded = idempotency(async (req) => {
          const slot = req.headers.get("x-slot")!;
          const behavior = req.headers.get("x-behavior") as Behavior;
          assert.ok(
            !recorded.has(slot),
            `${slot} ran again after a cacheable response`,
          );
          assert.equal(active.get(slot) ?? 0, 0, `${slot} ran twice at once`);
          active.set(slot, 1);
          const entry: Run = {
            run: runs.length,
            slot,
            behavior,
            cacheable: false,
          };
          runs.push(entry);
          const gate = deferred();
          gates.push({ open: () => gate.resolve() });
          await gate.promise;
          active.set(slot, 0);
          entry.cacheable = behavior !== "throw" && behavior !== "fail";
          if (entry.cacheable) recorded.set(slot, entry);
          return respond(entry.run, behavior);
        }, {
          store: new MemoryStore(),
          maxResponseBytes: CAP,
          scope: (req) => req.headers.get("x-scope")!,
        });

        async function check(
          response: Response,
          slot: string,
          behavior: Behavior,
        ) {
          const replayed =
            response.headers.get("idempotent-replayed") === "true";
          if (replayed) {
            const first = recorded.get(slot);
            assert.ok(first, "a replay has a recorded run behind it");
            assert.equal(response.status, STATUS[first.behavior]);
            const bytes = new Uint8Array(await response.arrayBuffer());
            const omitted = response.headers.get("idempotent-body-omitted");
            if (first.behavior === "big") assert.equal(omitted, "too_large");
            else if (first.behavior === "broken") {
              assert.equal(
                omitted,
                "stream_error",
              );
            } else {assert.deepEqual(
                bytes,
                liveBody(first.run, first.behavior),
              );}
            if (omitted) assert.equal(bytes.byteLength, 0);
            return;
          }
          if ([409, 422].includes(response.status)) {
            assert.equal(
              response.headers.get("content-type"),
              "application/problem+json",
            );
            await response.arrayBuffer();
            return;
          }
          // The handler's own answer: its status, and its bytes unless the body breaks.
          assert.equal(response.status, STATUS[behavior]);
          const reading = response.arrayBuffer();
          if (behavior === "broken") await assert.rejects(reading);
          else await reading;
        }

        for (const command of commands) {
          if (command.op === "finish") {
            if (gates.length === 0) continue;
            gates.splice(command.which % gates.length, 1)[0]!.open();
            await new Promise((r) => setTimeout(r, 0));
            continue;
          }
          const slot = `${command.scope}/${command.key}`;
          const request = new Request("http://api.test/op", {
            method: "POST",
            headers: {
              "idempotency-key": `key-${command.key}`,
              "x-scope": String(command.scope),
              "x-slot": slot,
              "x-behavior": command.behavior,
            },
            body: `body-${command.body}`,
          });
          const done = Promise.resolve(guarded(request)).then(
            (response) => check(response, slot, command.behavior),
            (error) => assert.match(String(error), /threw/),
          );
          pending.push({ done });
          await new Promise((r) => setTimeout(r, 0));
        }
        while (gates.length > 0) {
          gates.shift()!.open();
          await new Promise((r) => setTimeout(r, 0));
        }
        await Promise.all(pending.map((p) => p.done));
      },
    ),
    { numRuns: 150 },
  );
});
