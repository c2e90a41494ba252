// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Option checks through the public API (docs/architecture.md, Loud by
 * default; `src/_validate.ts`): the nearest-name hint for names that differ
 * by case, and its reach at n−1 / n / n+1 edits; a `logger` with only one of
 * `warn()` and `error()`, or `null`, refused naming what it lacks; a slot's
 * location for `inspectKey()` and `forgetKey()` given a key's fields too,
 * refused before the store is touched. The numeric options' edges are in
 * tests/idempotency_options_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency, MemoryStore, slotOf } from "../mod.ts";
import { forgetKey, inspectKey } from "../src/inspect.ts";
import { post } from "./_support/http.ts";

const ok = () => new Response("ok");

/** What `idempotency()` throws for these options. */
function thrown(options: Record<string, unknown>): TypeError {
  try {
    idempotency(ok, { scope: "global", ...options } as never);
  } catch (error) {
    assert.ok(error instanceof TypeError, String(error));
    return error;
  }
  throw new Error(`no throw for ${JSON.stringify(options)}`);
}

Deno.test("an option name that differs only by case is refused naming the option it means", () => {
  for (
    const [name, meant] of [
      ["TTL", "ttl"],
      ["Lease", "lease"],
      ["LEASE", "lease"],
      ["SCOPE", "scope"],
      ["maxresponsebytes", "maxResponseBytes"],
      ["MAXRESPONSEBYTES", "maxResponseBytes"],
      ["FailOpen", "failOpen"],
    ]
  ) {
    assert.equal(
      thrown({ [name!]: 1 }).message,
      `idempotency() has no option '${name}': did you mean '${meant}'?`,
    );
  }
  assert.throws(
    () => new MemoryStore({ MaxEntries: 1 } as never),
    new TypeError(
      "MemoryStore has no option 'MaxEntries': did you mean 'maxEntries'?",
    ),
  );
});

Deno.test("the hint reaches 40 % of the name's length in edits, rounded up, and no further: then every option is listed", () => {
  // [a name, edits from the option, whether it is hinted]
  const cases: [string, string, number, boolean][] = [
    ["rXXuired", "required", 2, true],
    ["rXXXired", "required", 3, true],
    ["rXXXXred", "required", 4, true], // 8 × 0.4 = 3.2, rounded up: 4
    ["rXXXXXed", "required", 5, false],
    ["cXXXXable", "cacheable", 4, true], // 9 × 0.4 = 3.6: 4
    ["cXXXXXble", "cacheable", 5, false],
    ["hXXXer", "header", 3, true], // 6 × 0.4 = 2.4: 3
    ["sXXpe", "scope", 2, true], // 5 × 0.4 = 2
    ["sXXXe", "scope", 3, false],
  ];
  for (const [name, meant, edits, hinted] of cases) {
    const { message } = thrown({ [name]: 1 });
    const what = `${name}, ${edits} edits from ${meant}`;
    if (hinted) {
      assert.match(message, new RegExp(`did you mean '${meant}'\\?$`), what);
    } else {
      assert.match(message, /: its options are 'store', 'scope', /, what);
      assert.doesNotMatch(message, /did you mean/, what);
    }
  }
});

Deno.test("a logger with only warn() or only error(), or null, is refused naming what it lacks; with both, without info(), it logs", async () => {
  const must =
    "'logger' must be false or an object with warn() and error(), such as console: current value";
  const cases: [unknown, string][] = [
    [{ warn() {} }, "has no error()"],
    [{ error() {} }, "has no warn()"],
    [{ warn: "console.warn", error() {} }, "has no warn()"],
    [{}, "has no warn() or error()"],
    [null, "is null"],
    [true, "is true"],
    ["console", "is console"],
  ];
  for (const [logger, lacks] of cases) {
    assert.equal(thrown({ logger }).message, `${must} ${lacks}`, lacks);
  }
  const lines: string[] = [];
  const both = {
    warn: (l: string) => lines.push(l),
    error: (l: string) => lines.push(l),
  };
  const store = new MemoryStore({ maxEntries: 1 });
  await store.claim("taken", {
    fingerprint: "",
    leaseMs: 60_000,
    ttlMs: 60_000,
  });
  const handler = idempotency(ok, { scope: "global", store, logger: both });
  assert.equal((await handler(post("k"))).status, 503);
  assert.match(lines[0]!, /store_error: /);
});

Deno.test("inspectKey() and forgetKey(): a slot given with a key's fields is refused naming the field, and nothing is forgotten", async () => {
  const store = new MemoryStore();
  const handler = idempotency(ok, { scope: "global", store });
  await (await handler(post("k"))).text();
  const slot = slotOf("", "k");
  const strays: [string, unknown][] = [
    ["scope", "tenant-a"],
    ["key", "k"],
    ["global", true],
    ["secret", "s".repeat(32)],
    ["Slot", slot],
  ];
  for (const [field, value] of strays) {
    const location = { slot, [field]: value } as never;
    const refused = new RegExp(
      `^TypeError: the slot's location has no option '${field}': `,
    );
    await assert.rejects(forgetKey(store, location), TypeError, field);
    await assert.rejects(forgetKey(store, location), refused, field);
    await assert.rejects(inspectKey(store, location), refused, field);
    assert.equal((await store.peek(slot)).state, "completed", `${field}: kept`);
  }
  // A key's fields with a scope and global both: refused too.
  const both = { scope: "tenant-a", global: true, key: "k" } as never;
  await assert.rejects(forgetKey(store, both), /not both/);
  assert.equal((await store.peek(slot)).state, "completed");
  assert.equal((await forgetKey(store, { slot })).result, "deleted");
});
