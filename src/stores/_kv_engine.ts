// Copyright 2026 the @idempotent/http authors. MIT license.
/** KvStore's operations: read-decide-commit loops checked on the versionstamp. @module */

import { StoreError } from "../store.ts";
import { completedPeek, inFlightPeek } from "./_shared.ts";
import type {
  ClaimOptions,
  ClaimResult,
  ForgetResult,
  OmittedReason,
  PeekResult,
  StoredResponse,
  StoreStats,
  WriteOutcome,
} from "../store.ts";
import { encodeHeaders, RECORD_VERSION, unreadable } from "../_record.ts";
import { SealCount } from "../_seal.ts";
import {
  CHUNK_SLACK_MS,
  type ChunkedRecord,
  completion,
  type InFlightRecord,
  type InlineRecord,
  type KvRecord,
  parseRecord,
} from "./_kv_record.ts";
import { DELETE_BATCH, KvBodies, unlocked } from "./_kv_bodies.ts";
import { applyMutations, hasChecks, type KvMutations } from "./_kv_unit.ts";
import type { Operation } from "./_store_call.ts";

/** Read-decide-commit attempts before a contended operation gives up. */
const MAX_ATTEMPTS = 16;

type Found =
  | { kind: "absent" }
  | { kind: "unreadable" }
  | { kind: "record"; record: KvRecord };

/** The store's operations, without their deadline, on `[...prefix, "rec", slot]`. */
export class KvEngine {
  #kv: Deno.Kv;
  #prefix: Deno.KvKey;
  #clock: () => number;
  #bodies: KvBodies;

  constructor(kv: Deno.Kv, prefix: Deno.KvKey, clock: () => number) {
    this.#kv = kv;
    this.#prefix = prefix;
    this.#clock = clock;
    this.#bodies = new KvBodies(kv, prefix);
  }

  /** See `KvStore.claim`. */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    const key = this.#recordKey(slot);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [entry, found] = await this.#read(slot);
      const now = this.#clock();
      if (found.kind === "unreadable") return unreadable(options.leaseMs);
      const previous = found.kind === "record" ? found.record : null;
      const live = previous !== null && now < previous.deadline
        ? previous
        : null;
      if (live?.state === "completed") {
        const response = await this.#bodies.response(slot, live);
        if (response !== null) {
          return { state: "completed", fingerprint: live.fp, response };
        }
        // Chunks missing: torn, unless the record changed meanwhile.
        const again = await unlocked(() => this.#kv.get(key));
        if (again.versionstamp !== entry.versionstamp) continue;
        return unreadable(options.leaseMs);
      }
      if (live !== null && now < live.leaseUntil) {
        const until = Math.min(live.leaseUntil, live.deadline);
        const retryAfterMs = Math.max(1, Math.ceil(until - now));
        return { state: "in_flight", fingerprint: live.fp, retryAfterMs };
      }
      const token = crypto.randomUUID();
      const fresh: InFlightRecord = {
        v: RECORD_VERSION,
        state: "in_flight",
        fp: options.fingerprint,
        token,
        leaseUntil: now + options.leaseMs,
        deadline: now + options.ttlMs,
      };
      const op = this.#kv.atomic()
        .check(entry)
        .set(key, fresh, { expireIn: expireIn(fresh.deadline, now) });
      const result = await unlocked(() => op.commit());
      if (!result.ok) continue;
      if (previous !== null) await this.#bodies.drop(slot, previous);
      return { state: "acquired", token, recovered: live !== null };
    }
    throw contended("claim", slot);
  }

  /** See `KvStore.complete`; `mutations` commit with the record. */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
    mutations?: KvMutations,
  ): Promise<WriteOutcome> {
    let [entry, found] = await this.#read(slot);
    let owned = owns(found, token, this.#clock());
    if (owned === null) return "lost";
    const { record: completed, parts } = completion(owned, response);
    let written: Deno.KvKey[] = [];
    if ("set" in completed) {
      const set = completed.set;
      written = parts.map((_, i) => this.#bodies.key(slot, token, set, i));
      const expiry = expireIn(owned.deadline, this.#clock()) + CHUNK_SLACK_MS;
      await this.#bodies.write(written, parts, expiry);
    }
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (await this.#replace(slot, entry, completed, undefined, mutations)) {
        return "applied";
      }
      const read = entry.versionstamp;
      [entry, found] = await this.#read(slot);
      if (
        mutations !== undefined && hasChecks(mutations) &&
        entry.versionstamp === read
      ) {
        // The record did not move: a check of the handler's failed.
        await this.#bodies.delete(written);
        throw new Error(
          "A check of the handler's mutations failed: nothing was committed",
        );
      }
      owned = owns(found, token, this.#clock());
      if (owned === null) {
        await this.#bodies.delete(written);
        return "lost";
      }
      // Still ours (a concurrent extend moved the versionstamp): keep its lease.
      completed.leaseUntil = owned.leaseUntil;
    }
    await this.#bodies.delete(written);
    throw contended("complete", slot);
  }

  /** See `KvStore.release`. */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [[entry, found], chunks] = await Promise.all([
        this.#read(slot),
        this.#bodies.written(slot, token),
      ]);
      if (owns(found, token, this.#clock()) === null) return "lost";
      if (!await this.#delete(slot, entry, chunks)) continue;
      return "applied";
    }
    throw contended("release", slot);
  }

  /** See `KvStore.extend`. */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [entry, found] = await this.#read(slot);
      const now = this.#clock();
      const owned = owns(found, token, now);
      if (owned === null) return "lost";
      const renewed: InFlightRecord = { ...owned, leaseUntil: now + leaseMs };
      if (await this.#replace(slot, entry, renewed, now)) return "applied";
    }
    throw contended("extend", slot);
  }

  /** See `KvStore.peek`: one read (and a chunked record's header chunks, or all its chunks with `response`). */
  async peek(slot: string, withResponse = false): Promise<PeekResult> {
    const [, found] = await this.#read(slot);
    if (found.kind === "unreadable") {
      return { state: "unreadable", expiresAt: null };
    }
    const record = found.kind === "record" ? found.record : null;
    if (record === null || this.#clock() >= record.deadline) {
      return { state: "absent" };
    }
    const { fp: fingerprint, deadline: expiresAt } = record;
    if (record.state === "in_flight") {
      return inFlightPeek(fingerprint, record.leaseUntil, expiresAt);
    }
    const response = withResponse
      ? await this.#bodies.response(slot, record)
      : undefined;
    const headers = response === undefined
      ? await this.#bodies.headers(slot, record)
      : response?.headers ?? null;
    const headerNames = headers && headers.map(([name]) => name);
    if (headerNames === null) return { state: "unreadable", expiresAt };
    const bodyBytes = "set" in record
      ? record.bodyLength
      : record.body?.byteLength ?? null;
    const omitted = record.omitted as OmittedReason | undefined; // checked on read
    const { status } = record;
    return completedPeek(
      fingerprint,
      { status, headerNames, bodyBytes, omitted },
      expiresAt,
      null,
      response ?? undefined,
    );
  }

  /** See `KvStore.forget`: the record and every chunk of the slot, in one commit when they fit. */
  async forget(slot: string): Promise<ForgetResult> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [[entry, found], chunks] = await Promise.all([
        this.#read(slot),
        this.#bodies.all(slot),
      ]);
      if (found.kind === "absent" && chunks.length === 0) return "absent";
      if (!await this.#delete(slot, entry, chunks)) continue;
      const live = found.kind === "unreadable" ||
        found.kind === "record" && this.#clock() < found.record.deadline;
      return live ? "deleted" : "absent";
    }
    throw contended("forget", slot);
  }

  /** See `KvStore.stats`: lists at most `limit` records. */
  async stats(limit: number): Promise<StoreStats> {
    const prefix = [...this.#prefix, "rec"];
    const now = this.#clock();
    // Counted afresh on each attempt: a locked file may refuse one midway.
    return await unlocked(async () => {
      const n = { inFlight: 0, completed: 0, unreadable: 0, exact: true };
      const completed: [string, InlineRecord | ChunkedRecord][] = [];
      let listed = 0;
      for await (
        const entry of this.#kv.list({ prefix }, { limit: limit + 1 })
      ) {
        if (++listed > limit) {
          n.exact = false;
          break;
        }
        const record = parseRecord(entry.value);
        if (record === null) n.unreadable++;
        else if (now >= record.deadline) continue;
        else if (record.state === "in_flight") n.inFlight++;
        else {
          n.completed++;
          completed.push([String(entry.key.at(-1)), record]);
        }
      }
      // The seal's key id: inline, or in the header chunks (read after the list).
      const sealed = new SealCount();
      for (const [slot, record] of completed) {
        if (!("set" in record)) sealed.add(encodeHeaders(record.headers));
        else {
          const headers = await this.#bodies.headers(slot, record);
          if (headers !== null) sealed.add(encodeHeaders(headers));
        }
      }
      return { ...n, ...sealed.counts };
    });
  }

  /** See `KvStore.waitForChange`. */
  async watch(slot: string, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const reader = this.#kv.watch([this.#recordKey(slot)]).getReader();
    const stop = () => void reader.cancel().catch(() => {});
    signal.addEventListener("abort", stop, { once: true });
    try {
      const first = await reader.read();
      const entry = first.value?.[0];
      if (first.done || entry === undefined || entry.versionstamp === null) {
        return;
      }
      const record = parseRecord(entry.value);
      const now = this.#clock();
      // An unreadable value stays in flight until it changes.
      if (
        record !== null && (record.state !== "in_flight" ||
          now >= record.leaseUntil || now >= record.deadline)
      ) {
        return;
      }
      for (;;) {
        const next = await reader.read();
        if (next.done || next.value[0]?.versionstamp !== entry.versionstamp) {
          return;
        }
      }
    } finally {
      signal.removeEventListener("abort", stop);
      stop();
    }
  }

  /** Whether the record, still the `entry` read, was replaced (expiry: its deadline). */
  async #replace(
    slot: string,
    entry: Deno.KvEntryMaybe<unknown>,
    record: KvRecord,
    now: number = this.#clock(),
    mutations?: KvMutations,
  ): Promise<boolean> {
    const op = this.#kv.atomic()
      .check(entry)
      .set(this.#recordKey(slot), record, {
        expireIn: expireIn(record.deadline, now),
      });
    if (mutations !== undefined) applyMutations(mutations, op);
    return (await unlocked(() => op.commit())).ok;
  }

  /**
   * Deletes the record, if `entry` is still its version, with `chunks`: in the
   * same commit when they fit, the rest after it; `false` if it changed.
   */
  async #delete(
    slot: string,
    entry: Deno.KvEntryMaybe<unknown>,
    chunks: Deno.KvKey[],
  ): Promise<boolean> {
    const inCommit = chunks.slice(0, DELETE_BATCH - 1);
    const op = this.#kv.atomic().check(entry).delete(this.#recordKey(slot));
    for (const key of inCommit) op.delete(key);
    const result = await unlocked(() => op.commit());
    if (!result.ok) return false;
    await this.#bodies.delete(chunks.slice(inCommit.length));
    return true;
  }

  #recordKey(slot: string): Deno.KvKey {
    return [...this.#prefix, "rec", slot];
  }

  async #read(slot: string): Promise<[Deno.KvEntryMaybe<unknown>, Found]> {
    const entry = await unlocked(() => this.#kv.get(this.#recordKey(slot)));
    if (entry.versionstamp === null) return [entry, { kind: "absent" }];
    const record = parseRecord(entry.value);
    return [
      entry,
      record === null ? { kind: "unreadable" } : { kind: "record", record },
    ];
  }
}

function contended(operation: Operation, slot: string): StoreError {
  const where = `slot ${JSON.stringify(slot)} after ${MAX_ATTEMPTS} attempts`;
  return new StoreError(`Deno KV stayed contended on ${where}`, { operation });
}

/** The in-flight record `token` owns at `now`, or `null` when it owns none. */
function owns(found: Found, token: string, now: number): InFlightRecord | null {
  if (found.kind !== "record") return null;
  const record = found.record;
  if (
    record.state !== "in_flight" || record.token !== token ||
    now >= record.deadline
  ) return null;
  return record;
}

/** `expireIn` for a record whose deadline is `deadline`: at least 1 ms. */
function expireIn(deadline: number, now: number): number {
  return Math.max(1, Math.ceil(deadline - now));
}
