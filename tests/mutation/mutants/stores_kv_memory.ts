// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of Deno KV, memory and failover (tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import {
  FAILOVER,
  KV_ENGINE,
  KV_RECORD,
  MEMORY,
  type Mutant,
  T,
} from "../_targets.ts";

/** The mutants of Deno KV, memory and failover. */
export const MUTANTS: Mutant[] = [
  // --- the five that survived the audit of issue 16 --------------------------
  {
    id: "kv-lease-boundary",
    file: KV_ENGINE,
    text: "if (live !== null && now < live.leaseUntil) {",
    replacement: "if (live !== null && now <= live.leaseUntil) {",
    tests: [...T.kv],
    what: "a KV claim is still owned at the exact end of its lease",
  },
  // --- fencing, all four stores ----------------------------------------------
  {
    id: "memory-fence-token",
    file: MEMORY,
    text: "entry.token !== token ||\n      entry.deadline <= now",
    replacement: "entry.deadline <= now",
    tests: [...T.memory],
    what: "MemoryStore applies a write from any token",
  },
  {
    id: "memory-fence-expired",
    file: MEMORY,
    text: "entry.token !== token ||\n      entry.deadline <= now",
    replacement: "entry.token !== token",
    tests: [...T.memory],
    what: "MemoryStore lets the owner of an expired record still write to it",
  },
  {
    id: "kv-fence-token",
    file: KV_ENGINE,
    text: `record.state !== "in_flight" || record.token !== token ||`,
    replacement: `record.state !== "in_flight" ||`,
    tests: [...T.kv],
    what: "KvStore applies a write from any token",
  },
  // --- FailoverStore routing -------------------------------------------------
  {
    id: "failover-skips-fallback-lookup",
    file: FAILOVER,
    text:
      "second = await this.#fallback.claim(slot, options);\n      this.#fallbackAnswered = true;",
    replacement:
      `second = { state: "acquired", token: "-", recovered: false } as ClaimResult;\n      this.#fallbackAnswered = true;`,
    tests: [...T.failover],
    what: "a record written to PostgreSQL during an outage is not honoured",
  },
  {
    id: "failover-copies-foreign-record",
    file: FAILOVER,
    text: "if (second.fingerprint === options.fingerprint) {",
    replacement: "if (second.fingerprint !== undefined) {",
    tests: [...T.failover],
    what: "another request's record is copied into Redis under this claim",
  },
  {
    id: "failover-no-fallback-when-down",
    file: FAILOVER,
    text: "return await this.#claimFallback(slot, options, primaryError);",
    replacement: "throw primaryError;",
    tests: [...T.failover],
    what: "Redis down means 503 instead of PostgreSQL",
  },
  // --- a defence against damaged values ---------------------------------------
  {
    id: "kv-chunk-count-unchecked",
    file: KV_RECORD,
    text: "if (r.chunks !== Math.ceil(total / CHUNK_BYTES)) return null;",
    replacement: "",
    tests: [...T.kv],
    what: "a damaged chunk count makes a reader fetch chunks it never wrote",
  },
  {
    id: "rule3-kv-claim-unchecked",
    file: KV_ENGINE,
    text: ".check(entry)\n        .set(key, fresh,",
    replacement: ".set(key, fresh,",
    tests: [...T.kv],
    what: "rule 3: a KV claim commits without checking what it read",
  },
  {
    id: "rule5-memory-ttl-boundary",
    file: MEMORY,
    text: "if (entry !== undefined && entry.deadline <= now) {",
    replacement: "if (entry !== undefined && entry.deadline < now) {",
    tests: [...T.memory],
    what: "rule 5: a record still blocks at the exact end of its TTL",
  },
  {
    id: "memory-dropped-body-referenced",
    file: MEMORY,
    text: "this.#withBody.remove(done);\n    this.#bodiless.push(done);",
    replacement: "this.#bodiless.push(done);",
    tests: [T.memoryBound],
    what:
      "a record whose body was dropped under maxBytes stays in the heap of records with a body",
  },
  {
    id: "failover-in-flight-final",
    file: FAILOVER,
    text: "return await this.#checkInFlight(slot, options, first);",
    replacement: "return first;",
    tests: [...T.failover],
    what: "a late Redis claim hides the record PostgreSQL completed: 409s",
  },
  {
    id: "memory-drop-reason",
    file: MEMORY,
    text: "done.omitted = STORE_DROPPED;",
    replacement: 'done.omitted = "too_large";',
    tests: [...T.memory, ...T.sealing],
    what:
      "a body MemoryStore drops reads as the middleware's too_large: under a seal it no longer opens",
  },
  // --- issue 25, src/stores/memory.ts: documented numbers and shared data ---
  {
    id: "memory-body-fits-under",
    file: MEMORY,
    text: "const fits = body !== null && done.bytes + size <= this.#maxBytes;",
    replacement:
      "const fits = body !== null && done.bytes + size < this.#maxBytes;",
    tests: [...T.memory],
    what: "a body that fills maxBytes exactly is stored without its body",
  },
  {
    id: "memory-bytes-full-early",
    file: MEMORY,
    text: "while (this.#bytes + size > this.#maxBytes) {",
    replacement: "while (this.#bytes + size >= this.#maxBytes) {",
    tests: [...T.memory],
    what:
      "an older body is dropped when the store would be exactly at maxBytes",
  },
  {
    id: "memory-entries-one-more",
    file: MEMORY,
    text: "if (this.#entries.size < this.#maxEntries) return;",
    replacement: "if (this.#entries.size <= this.#maxEntries) return;",
    tests: [...T.memory],
    what: "the store holds maxEntries + 1 records",
  },
  {
    id: "memory-entries-one-less",
    file: MEMORY,
    text: "if (this.#entries.size < this.#maxEntries) return;",
    replacement: "if (this.#entries.size < this.#maxEntries - 1) return;",
    tests: [...T.memory],
    what: "the store evicts a record to hold its maxEntries-th",
  },
  {
    id: "memory-counts-shared-buffer",
    file: MEMORY,
    text: "const size = body?.byteLength ?? 0;",
    replacement: "const size = body?.buffer.byteLength ?? 0;",
    tests: [...T.memory],
    what:
      "a body that views a larger buffer counts the whole buffer against maxBytes",
  },
  {
    id: "memory-default-max-bytes",
    file: MEMORY,
    text: "maxBytes ?? 67_108_864",
    replacement: "maxBytes ?? 67_108_863",
    tests: [...T.memory],
    what: "the default maxBytes is a byte short of 64 MiB",
  },
  {
    id: "memory-default-max-entries",
    file: MEMORY,
    text: "maxEntries ?? 100_000",
    replacement: "maxEntries ?? 100_001",
    tests: [...T.memory],
    what: "the default maxEntries is 100,001",
  },
  {
    id: "memory-wide-from-u0080",
    file: MEMORY,
    text: "const WIDE = /[\\u0100-\\uffff]/;",
    replacement: "const WIDE = /[\\u0080-\\uffff]/;",
    tests: [...T.memory],
    what: "a key with a Latin-1 character counts twice its characters past 64",
  },
  {
    id: "memory-wide-counted-once",
    file: MEMORY,
    text: "2 * key.length - KEY_CHARS",
    replacement: "key.length - KEY_CHARS",
    tests: [...T.memory],
    what: "a key of two-byte characters counts one byte a character",
  },
  // --- issue 25, src/stores/failover.ts: a fallback trusted once it answered ---
  {
    id: "failover-served-fallback-untrusted",
    file: FAILOVER,
    text:
      "result = await this.#fallback.claim(slot, options);\n      this.#fallbackAnswered = true;",
    replacement: "result = await this.#fallback.claim(slot, options);",
    tests: [...T.failover],
    what:
      "a fallback that served claims while the primary was down is still untrusted: its outage refuses every claim",
  },
  {
    id: "failover-both-claim-untrusted",
    file: FAILOVER,
    text:
      "second = await this.#fallback.claim(slot, options);\n      this.#fallbackAnswered = true;",
    replacement: "second = await this.#fallback.claim(slot, options);",
    tests: [...T.failover],
    what:
      "a fallback that answered b: claims is still untrusted: its outage refuses every claim",
  },
  {
    id: "failover-strict-ignored",
    file: FAILOVER,
    text: "if (!answered || this.#strict) {",
    replacement: "if (!answered) {",
    tests: [...T.failover],
    what:
      "strict grants a claim on the primary alone once the fallback answered",
  },
  {
    id: "failover-trusted-from-start",
    file: FAILOVER,
    text: "#fallbackAnswered = false;",
    replacement: "#fallbackAnswered = true;",
    tests: [...T.failover],
    what:
      "a fallback that never answered is trusted: a missing table looks like an outage and claims go on",
  },
  {
    id: "failover-either-applied",
    file: FAILOVER,
    text: "    return f.value;\n  }",
    replacement: '    return p.value === "applied" ? p.value : f.value;\n  }',
    tests: [...T.failover],
    what:
      "a b: write the fallback lost is applied because the primary applied it",
  },
  {
    id: "failover-fallback-failed-applied",
    file: FAILOVER,
    text: 'if (p.ok) return failed("fallback", f.error), p.value;',
    replacement: 'if (p.ok) return failed("fallback", f.error), "applied";',
    tests: [...T.failover],
    what: "a b: write the primary lost is applied when the fallback throws",
  },
  {
    id: "failover-primary-failed-applied",
    file: FAILOVER,
    text: 'if (!p.ok) return failed("primary", p.error), f.value;',
    replacement: 'if (!p.ok) return failed("primary", p.error), "applied";',
    tests: [...T.failover],
    what: "a b: write the fallback lost is applied when the primary throws",
  },
  // --- issue 25, src/stores/kv.ts and its private files: checks, budgets, attempts ---
  {
    id: "kv-unit-moved-is-check",
    file: KV_ENGINE,
    text: "entry.versionstamp === read",
    replacement: "entry.versionstamp !== null",
    tests: ["tests/stores/kv_transaction_test.ts"],
    what:
      "a record that moved under a unit with checks is reported as a failed check: a takeover throws, an extend fails the commit",
  },
  {
    id: "kv-unit-check-is-lost",
    file: KV_ENGINE,
    text:
      'throw new Error(\n          "A check of the handler\'s mutations failed: nothing was committed",\n        );',
    replacement: 'return "lost";',
    tests: ["tests/stores/kv_transaction_test.ts"],
    what:
      "a failed check of the handler's is reported lost (409) instead of unknown (503)",
  },
  {
    id: "kv-inline-budget-under",
    file: KV_RECORD,
    text: "if (inlineSize(owned, response) <= INLINE_BUDGET) {",
    replacement: "if (inlineSize(owned, response) < INLINE_BUDGET) {",
    tests: [...T.kv],
    what: "a record exactly at the inline budget is chunked",
  },
  {
    id: "kv-chunk-bytes-short",
    file: KV_RECORD,
    text: "const CHUNK_BYTES = 65_536;",
    replacement: "const CHUNK_BYTES = 65_535;",
    tests: [...T.kv],
    what: "chunks hold a byte less than 64 KiB",
  },
  {
    id: "kv-attempts-fewer",
    file: KV_ENGINE,
    text: "const MAX_ATTEMPTS = 16;",
    replacement: "const MAX_ATTEMPTS = 15;",
    tests: [...T.kv],
    what: "a contended operation gives up after 15 attempts",
  },
  {
    id: "kv-attempts-more",
    file: KV_ENGINE,
    text: "const MAX_ATTEMPTS = 16;",
    replacement: "const MAX_ATTEMPTS = 17;",
    tests: [...T.kv],
    what: "a contended operation tries 17 times",
  },
  {
    id: "kv-locked-fewer",
    file: "src/stores/_kv_bodies.ts",
    text: "const LOCKED_ATTEMPTS = 10;",
    replacement: "const LOCKED_ATTEMPTS = 9;",
    tests: [...T.kv],
    what: "a locked database is tried 9 times",
  },
  {
    id: "kv-locked-more",
    file: "src/stores/_kv_bodies.ts",
    text: "const LOCKED_ATTEMPTS = 10;",
    replacement: "const LOCKED_ATTEMPTS = 11;",
    tests: [...T.kv],
    what: "a locked database is tried 11 times",
  },
  {
    id: "kv-owner-at-ttl",
    file: KV_ENGINE,
    text: "now >= record.deadline\n  ) return null;",
    replacement: "now > record.deadline\n  ) return null;",
    tests: [...T.kv],
    what: "an owner still writes at the exact end of its record's TTL",
  },
  {
    id: "kv-retry-after-lease-only",
    file: KV_ENGINE,
    text: "const until = Math.min(live.leaseUntil, live.deadline);",
    replacement: "const until = live.leaseUntil;",
    tests: [...T.kv],
    what:
      "an in-flight answer's Retry-After runs to a lease that outlives the TTL",
  },
  {
    id: "kv-claim-live-at-ttl",
    file: KV_ENGINE,
    text: "const live = previous !== null && now < previous.deadline",
    replacement: "const live = previous !== null && now <= previous.deadline",
    tests: [...T.kv],
    what: "a record blocks a claim at the exact end of its TTL",
  },
  {
    id: "kv-default-timeout",
    file: "src/stores/kv.ts",
    text: "const timeoutMs = timeoutOption(options?.timeoutMs, 10_000);",
    replacement: "const timeoutMs = timeoutOption(options?.timeoutMs, 9_999);",
    tests: ["tests/stores/kv_deadline_test.ts"],
    what: "a KV operation gets 9,999 ms by default, not 10,000",
  },
  {
    id: "kv-chunk-slack-short",
    file: KV_RECORD,
    text: "export const CHUNK_SLACK_MS = 60_000;",
    replacement: "export const CHUNK_SLACK_MS = 59_999;",
    tests: [...T.kv],
    what: "chunks expire a millisecond less than a minute after their record",
  },
  {
    id: "kv-get-many-fewer",
    file: KV_RECORD,
    text: "export const GET_MANY = 10;",
    replacement: "export const GET_MANY = 9;",
    tests: [...T.kv],
    what: "chunks are read 9 keys a call",
  },
  {
    id: "kv-read-window-wider",
    file: KV_RECORD,
    text: "export const READ_WINDOW = 8 * GET_MANY;",
    replacement: "export const READ_WINDOW = 9 * GET_MANY;",
    tests: [...T.kv],
    what: "a reader has 9 getMany calls out at once, 90 chunks",
  },
  {
    id: "kv-watch-lease-end-waits",
    file: KV_ENGINE,
    text: "now >= record.leaseUntil || now >= record.deadline)",
    replacement: "now > record.leaseUntil || now >= record.deadline)",
    tests: [...T.kv],
    what: "waitForChange() waits on a lease that ends exactly now",
  },
  {
    id: "kv-watch-ttl-end-waits",
    file: KV_ENGINE,
    text: "now >= record.leaseUntil || now >= record.deadline)",
    replacement: "now >= record.leaseUntil || now > record.deadline)",
    tests: [...T.kv],
    what: "waitForChange() waits on a claim whose TTL ends exactly now",
  },
  {
    id: "memory-peek-expired",
    file: "src/stores/memory.ts",
    text: "if (entry === undefined || entry.deadline <= this.#clock()) {",
    replacement: "if (entry === undefined) {",
    tests: [...T.memory],
    what: "MemoryStore.peek() reports an expired record as held",
  },
  {
    id: "memory-forget-bookkeeping",
    file: "src/stores/memory.ts",
    text: `    this.#drop(entry);
    return entry.deadline <= this.#clock() ? "absent" : "deleted";`,
    replacement: `    this.#entries.delete(slot);
    return entry.deadline <= this.#clock() ? "absent" : "deleted";`,
    tests: [...T.memory],
    what:
      "MemoryStore.forget() leaves the record's bytes and heap entry behind",
  },
  {
    id: "kv-forget-chunks",
    file: "src/stores/_kv_engine.ts",
    text: "this.#bodies.all(slot),",
    replacement: "Promise.resolve([] as Deno.KvKey[]),",
    tests: [...T.kv],
    what: "KvStore.forget() leaves a chunked body's chunks behind",
  },
  {
    id: "kv-peek-header-chunks",
    file: "src/stores/_kv_bodies.ts",
    text: "Math.ceil(record.headersLength / CHUNK_BYTES),",
    replacement: "Math.floor(record.headersLength / CHUNK_BYTES),",
    tests: [...T.kv],
    what:
      "KvStore.peek() reads too few header chunks: a chunked record reads unreadable",
  },
  {
    id: "kv-stats-limit",
    file: "src/stores/_kv_engine.ts",
    text: "{ limit: limit + 1 }",
    replacement: "{ limit }",
    tests: [...T.kv],
    what: "KvStore.stats() stops at its limit and calls the count exact",
  },
  {
    id: "failover-peek-fallback-completed",
    file: "src/stores/_shared.ts",
    text: '(primary.state !== "absent" && fallback.state !== "completed")',
    replacement: '(primary.state !== "absent")',
    tests: ["tests/stores/failover_admin_test.ts"],
    what:
      "FailoverStore.peek() hides the fallback's completed record behind a primary orphan",
  },
  {
    id: "failover-forget-either",
    file: "src/stores/_failover_both.ts",
    text: 'p.value === "deleted" || f.value === "deleted"',
    replacement: 'p.value === "deleted" && f.value === "deleted"',
    tests: ["tests/stores/failover_admin_test.ts"],
    what:
      "FailoverStore.forget() answers absent when only one store held the slot",
  },
  {
    id: "failover-subscribe-not-inner",
    file: "src/stores/failover.ts",
    text: "this.#primary.subscribe?.(listener);",
    replacement: "",
    tests: ["tests/logging_store_test.ts"],
    what: "a FailoverStore's subscriber never hears its primary's undos",
  },
  {
    id: "kv-transactional-keyless-uncommitted",
    file: "src/stores/kv.ts",
    text: "const { ok } = await unlocked(() => op.commit());",
    replacement: "const ok = true;",
    tests: [T.keyless],
    what: "a keyless KV handler's writes are never committed",
  },
  {
    id: "kv-transactional-keyless-check-ignored",
    file: "src/stores/kv.ts",
    text: "      if (!ok) {\n        await response.body?.cancel();",
    replacement: "      if (false) {\n        await response.body?.cancel();",
    tests: [T.keyless],
    what: "a keyless KV commit whose check failed answers as if committed",
  },
];
