// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The middleware's log (`src/_log.ts`, the `logger` option): which events
 * are written, to whom by default, and at most one line per kind a minute
 * with the count of the rest. The real misconfigurations (Redis not
 * connected, a table never migrated, ...) are in `misconfiguration_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { idempotency, MemoryStore, slotOf } from "../mod.ts";
import type { IdempotencyEvent } from "../src/events.ts";
import { logListener } from "../src/_log.ts";
import { idempotencyOn } from "./_support/idempotency.ts";
import { post } from "./_support/http.ts";
import { FakeClock } from "./_support/time.ts";

/** The log's documented minute: a kind's later lines are counted for it. */
const LOG_INTERVAL_MS = 60_000;

/** A logger that keeps its lines, by level. */
function recorder() {
  const lines: { level: "warn" | "error"; line: string }[] = [];
  return {
    lines,
    warn: (line: string) => void lines.push({ level: "warn", line }),
    error: (line: string) => void lines.push({ level: "error", line }),
  };
}

/** A MemoryStore whose every claim fails: one live claim fills it. */
async function fullStore(): Promise<MemoryStore> {
  const store = new MemoryStore({ maxEntries: 1 });
  const options = { fingerprint: "", leaseMs: 600_000, ttlMs: 600_000 };
  await store.claim("taken", options);
  return store;
}

/** The console, stubbed by the tests that read the default log. */
const terminal = globalThis.console;

const ok = () => new Response("ok");

Deno.test("idempotency() without onEvent writes a failing claim to console.error at once, its cause in the line", async () => {
  const store = await fullStore();
  const clock = new FakeClock();
  const handler = idempotencyOn(clock, ok, {
    scope: "global",
    store,
  });
  const written: unknown[][] = [];
  const original = terminal.error;
  terminal.error = (...data: unknown[]) => void written.push(data);
  try {
    assert.equal((await handler(post("k1"))).status, 503);
  } finally {
    terminal.error = original;
  }
  assert.equal(written.length, 1);
  assert.equal(written[0]!.length, 1, "one line, one argument");
  assert.match(
    String(written[0]![0]),
    /^\[@idempotent\/http\] store_error: the store's claim failed .*MemoryStore is full/,
  );
});

Deno.test("idempotency() writes a kind once a minute: the rest are counted in one line at the minute's end", async () => {
  const store = await fullStore();
  const clock = new FakeClock();
  const logger = recorder();
  const handler = idempotencyOn(clock, ok, {
    scope: "global",
    store,
    logger,
  });
  for (let i = 0; i < 5; i++) await handler(post(`k${i}`));
  assert.equal(logger.lines.length, 1, "one line within the minute");
  await clock.advanceTo(clock.now() + LOG_INTERVAL_MS - 1);
  assert.equal(logger.lines.length, 1);
  await clock.advanceTo(clock.now() + 1);
  assert.equal(logger.lines.length, 2);
  assert.equal(logger.lines[1]!.level, "error");
  assert.match(
    logger.lines[1]!.line,
    /store_error happened 4 times in the last minute; the latest: store_error: .*MemoryStore is full/,
  );
  // A quiet minute: the next one is written at once again.
  await clock.advanceTo(clock.now() + LOG_INTERVAL_MS);
  assert.equal(logger.lines.length, 2, "nothing to count, no line");
  await handler(post("k9"));
  assert.equal(logger.lines.length, 3);
  assert.match(logger.lines[2]!.line, /^\[@idempotent\/http\] store_error:/);
});

Deno.test("idempotency() with onEvent still logs to console; logger: false logs nothing; onEvent runs first and its throw changes nothing", async () => {
  const store = await fullStore();
  const seen: string[] = [];
  const onEvent = (event: IdempotencyEvent) => void seen.push(event.type);
  const written: unknown[][] = [];
  const original = terminal.error;
  terminal.error = (...data: unknown[]) => {
    written.push(data);
    seen.push("logged");
  };
  try {
    await idempotency(ok, { scope: "global", store, onEvent })(post("a"));
    assert.equal(written.length, 1, "onEvent given: console still gets it");
    assert.match(String(written[0]![0]), /store_error: the store's claim/);
    await idempotency(ok, { scope: "global", store, logger: false })(
      post("b"),
    );
    await idempotency(ok, { scope: "global", store, onEvent, logger: false })(
      post("b"),
    );
  } finally {
    terminal.error = original;
  }
  assert.equal(written.length, 1, "logger: false writes nothing");
  assert.deepEqual(seen, [
    "store_error",
    "logged",
    "unavailable",
    "store_error",
    "unavailable",
  ]);
  const logger = recorder();
  const throwing = () => {
    throw new Error("a listener's throw");
  };
  for (const listener of [onEvent, throwing]) {
    await idempotency(ok, {
      scope: "global",
      store,
      onEvent: listener,
      logger,
    })(
      post("c"),
    );
  }
  assert.equal(seen.length, 7);
  assert.equal(logger.lines.length, 2, "each handler's log has its minute");
});

Deno.test("idempotency() logs a fail_open with warn, and an unreadable record with warn", async () => {
  const logger = recorder();
  const store = await fullStore();
  const open = idempotency(ok, {
    scope: "global",
    store,
    failOpen: true,
    logger,
  });
  assert.equal((await open(post("k1"))).status, 200);
  assert.deepEqual(logger.lines.map((l) => [l.level, l.line.split(":")[0]]), [
    ["error", "[@idempotent/http] store_error"],
    ["warn", "[@idempotent/http] fail_open"],
  ]);
  assert.match(logger.lines[1]!.line, /'failOpen' ran the handler unguarded/);

  // A record sealed under a key the second handler does not hold.
  const shared = new MemoryStore();
  const aes = { name: "AES-GCM", length: 256 };
  const sealer = async () =>
    await crypto.subtle.generateKey(aes, false, ["encrypt", "decrypt"]);
  const [first, second] = [await sealer(), await sealer()];
  const keys = (key: CryptoKey) => ({ keys: [{ id: "k", key }] });
  await (await idempotency(ok, {
    scope: "global",
    store: shared,
    encryption: keys(first),
  })(post("k2"))).text();
  const other = recorder();
  const reader = idempotency(ok, {
    scope: "global",
    store: shared,
    encryption: keys(second),
    logger: other,
  });
  assert.equal((await reader(post("k2"))).status, 500);
  assert.equal(other.lines.length, 1);
  assert.equal(other.lines[0]!.level, "warn");
  const line = other.lines[0]!.line;
  assert.match(
    line,
    /unreadable: .* answers 500 .*: does not open under key id "k": altered in the store, or moved/,
  );
  // A record of ours expires: the line says when, and how to forget it now.
  const slot = slotOf("", "k2");
  assert.match(
    line,
    /stays until it expires at \d{4}-\d\d-\d\dT[^,]+Z, or until forgotten/,
  );
  assert.ok(line.includes(`idem forget STORE --slot ${slot} --yes`), line);
});

Deno.test("logListener() writes lease_lost and given-up writes, and nothing for the events of a working store", () => {
  const logger = recorder();
  const log = logListener(logger, new FakeClock());
  const base = { slot: "s", elapsedMs: 1 };
  log({ ...base, type: "claimed", recovered: false });
  log({ ...base, type: "conflict", retryAfterMs: 1, unreadable: false });
  const write = {
    stored: "full",
    bytes: 1,
    attempts: 3,
    background: true,
  } as const;
  log({ ...base, type: "completed", ...write, outcome: "applied" } as const);
  log({ ...base, type: "completed", ...write, outcome: "lost" } as const);
  assert.equal(logger.lines.length, 0);
  log({ ...base, type: "lease_lost" });
  log({ ...base, type: "completed", ...write, outcome: "unknown" } as const);
  log({
    ...base,
    type: "released",
    reason: "thrown",
    outcome: "unknown",
    attempts: 2,
  });
  assert.deepEqual(logger.lines.map((l) => l.level), ["warn", "error"]);
  assert.match(
    logger.lines[0]!.line,
    /lease_lost: a handler still running lost its key \(slot s\) to another request or an operator's forget, so it may run twice: raise 'lease'/,
  );
  assert.match(
    logger.lines[1]!.line,
    /write_given_up: a record's completion was given up after 3 attempts .*may run the handler again/,
  );
});

Deno.test("logListener() writes at most one line per kind per minute, and counts every event it held back", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          wait: fc.integer({ min: 0, max: 2 * LOG_INTERVAL_MS }),
          kind: fc.constantFrom("lease_lost", "store_error"),
        }),
        { maxLength: 40 },
      ),
      async (steps) => {
        const clock = new FakeClock();
        const lines: { at: number; line: string }[] = [];
        const push = (line: string) =>
          void lines.push({ at: clock.now(), line });
        const log = logListener({ warn: push, error: push }, clock);
        const base = { slot: "s", elapsedMs: 0 };
        const count = new Map<string, number>();
        for (const { wait, kind } of steps) {
          await clock.advanceTo(clock.now() + wait, () => Promise.resolve());
          count.set(kind, (count.get(kind) ?? 0) + 1);
          log(
            kind === "lease_lost" ? { ...base, type: "lease_lost" } : {
              ...base,
              type: "store_error",
              operation: "claim",
              error: new Error("down"),
            },
          );
        }
        await clock.advanceTo(clock.now() + LOG_INTERVAL_MS);
        for (const kind of ["lease_lost", "store_error"] as const) {
          const mine = lines.filter((l) => l.line.includes(`] ${kind}`));
          for (let i = 1; i < mine.length; i++) {
            assert.ok(mine[i]!.at - mine[i - 1]!.at >= LOG_INTERVAL_MS);
          }
          const told = mine.reduce((sum, { line }) => {
            const n = /happened (\d+) times/.exec(line)?.[1];
            return sum + (n === undefined ? 1 : Number(n)); // or "once more"
          }, 0);
          assert.equal(told, count.get(kind) ?? 0);
        }
        assert.equal(clock.pending, 0, "no timer left behind");
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("a log line held back for its minute does not keep the process alive", async () => {
  // Two store errors: the second waits for the minute's count line, on a timer
  // that must not hold the process open.
  const script = `
    import { idempotency, MemoryStore } from "${new URL(
    "../mod.ts",
    import.meta.url,
  )}";
    const store = new MemoryStore({ maxEntries: 1 });
    await store.claim("x", { fingerprint: "f", leaseMs: 60_000, ttlMs: 60_000 });
    const handler = idempotency(() => new Response("ok"), { scope: "global", store });
    for (const key of ["a", "b"]) {
      const headers = { "idempotency-key": key };
      const res = await handler(new Request("http://localhost/", { method: "POST", headers }));
      await res.body?.cancel();
    }
    console.log("served");
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", script],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // A bound for a failure only: a timer kept alive would hold it a minute.
  const bound = setTimeout(() => child.kill(), 30_000);
  const { code, stdout, stderr } = await child.output();
  clearTimeout(bound);
  const errors = new TextDecoder().decode(stderr);
  assert.equal(code, 0, errors);
  assert.equal(new TextDecoder().decode(stdout).trim(), "served");
  assert.equal(errors.match(/store_error/g)?.length, 1, errors);
});

Deno.test("logListener(): an unreadable value without an expiry says it may stay for ever, with the command that forgets its slot; one with an expiry or none known says so", () => {
  const logger = recorder();
  const log = logListener(logger, new FakeClock());
  const conflict = (slot: string, expiresAt?: number | null) =>
    log({
      type: "conflict",
      slot,
      elapsedMs: 1,
      retryAfterMs: 30_000,
      unreadable: true,
      ...(expiresAt === undefined ? {} : { expiresAt }),
    });
  conflict("a1", null);
  assert.equal(logger.lines.length, 1);
  assert.equal(logger.lines[0]!.level, "warn");
  assert.match(
    logger.lines[0]!.line,
    /^\[@idempotent\/http\] unreadable: .*answers 500 and never runs the handler: .*; the store reports no expiry for it \(Redis: no TTL\), so it may stay for ever: idem forget STORE --slot a1 --yes \(STORE: the app's store as --help lists them, --redis URL to --sqlite PATH, both of a FailoverStore, with its --prefix or --table\)$/,
  );
  for (
    const [expiresAt, text] of [
      [Date.UTC(2030, 0, 2, 3, 4, 5), "expires at 2030-01-02T03:04:05.000Z,"],
      [undefined, "expires, or until"],
    ] as const
  ) {
    const fresh = recorder();
    logListener(fresh, new FakeClock())({
      type: "conflict",
      slot: "b2",
      elapsedMs: 1,
      retryAfterMs: 1,
      unreadable: true,
      ...(expiresAt === undefined ? {} : { expiresAt }),
    });
    assert.ok(fresh.lines[0]!.line.includes(`it stays until it ${text}`));
    assert.ok(
      fresh.lines[0]!.line.includes("idem forget STORE --slot b2 --yes"),
    );
  }
  // Once a minute: a second slot within it is counted, not written.
  conflict("c3", null);
  assert.equal(logger.lines.length, 1);
});
