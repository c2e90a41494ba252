// Copyright 2026 the @idempotent/http authors. MIT license.
/** KvStore's Deno KV calls for bodies, and their retry while a file is locked. @module */

import { backoff, delay } from "../_async.ts";
import type { StoredResponse } from "../store.ts";
import { decodeHeaders, toStoredResponse } from "../_record.ts";
import { concatBytes } from "../_bytes.ts";
import {
  assemble,
  CHUNK_BYTES,
  type ChunkedRecord,
  commitGroups,
  GET_MANY,
  type InlineRecord,
  type KvRecord,
  READ_WINDOW,
} from "./_kv_record.ts";

/** Deletes per cleanup commit (Deno KV's limit is 1000 mutations). */
export const DELETE_BATCH = 500;
const LOCKED_ATTEMPTS = 10;

/**
 * Runs a Deno KV call, again after a short random pause while a local file
 * is locked by another handle ("database is locked"): SQLite refuses such a
 * call before doing anything, so repeating it is safe.
 */
export async function unlocked<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (
        attempt >= LOCKED_ATTEMPTS ||
        !String((error as Error)?.message).includes("database is locked")
      ) throw error;
      await delay(backoff(attempt, { first: 2, max: 50, jitter: "full" }));
    }
  }
}

/** The bodies of one KvStore: chunk values under `[...prefix, "chunk"]`. */
export class KvBodies {
  #kv: Deno.Kv;
  #prefix: Deno.KvKey;

  constructor(kv: Deno.Kv, prefix: Deno.KvKey) {
    this.#kv = kv;
    this.#prefix = prefix;
  }

  /** The key of chunk `i` of the chunk set `set` that `token` wrote. */
  key(slot: string, token: string, set: string, i: number): Deno.KvKey {
    return [...this.#prefix, "chunk", slot, token, set, i];
  }

  /** Reads a completed record's response, or `null` when its chunks are torn. */
  async response(
    slot: string,
    record: InlineRecord | ChunkedRecord,
  ): Promise<StoredResponse | null> {
    if (!("set" in record)) {
      const { status, headers, body, omitted } = record;
      return toStoredResponse(status, headers, body, omitted);
    }
    // A window at a time, stopping at the first missing or surplus byte: a
    // reader allocates what is stored, whatever a hostile record claims.
    const total = record.headersLength + (record.bodyLength ?? 0);
    const values: Uint8Array[] = [];
    let length = 0;
    for (let first = 0; first < record.chunks; first += READ_WINDOW) {
      const end = Math.min(record.chunks, first + READ_WINDOW);
      const keys = Array.from(
        { length: end - first },
        (_, j) => this.key(slot, record.token, record.set, first + j),
      );
      const reads: Promise<Deno.KvEntryMaybe<unknown>[]>[] = [];
      for (let i = 0; i < keys.length; i += GET_MANY) {
        const batch = keys.slice(i, i + GET_MANY);
        reads.push(unlocked(() => this.#kv.getMany(batch)));
      }
      const entries = (await Promise.all(reads)).flat();
      for (const entry of entries) {
        if (!(entry.value instanceof Uint8Array)) return null;
        length += entry.value.byteLength;
        if (length > total) return null;
        values.push(entry.value);
      }
    }
    return assemble(record, values, length);
  }

  /**
   * A completed record's header list, reading only the chunks that hold it;
   * `null` when they are torn (for `peek` and `stats`).
   */
  async headers(
    slot: string,
    record: InlineRecord | ChunkedRecord,
  ): Promise<[string, string][] | null> {
    let headers: [string, string][] | null = null;
    if (!("set" in record)) headers = record.headers;
    else {
      const count = Math.min(
        record.chunks,
        Math.ceil(record.headersLength / CHUNK_BYTES),
      );
      const keys = Array.from(
        { length: count },
        (_, i) => this.key(slot, record.token, record.set, i),
      );
      const values: Uint8Array[] = [];
      for (let i = 0; i < keys.length; i += GET_MANY) {
        const batch = keys.slice(i, i + GET_MANY);
        for (const entry of await unlocked(() => this.#kv.getMany(batch))) {
          if (!(entry.value instanceof Uint8Array)) return null;
          values.push(entry.value);
        }
      }
      const length = values.reduce((n, value) => n + value.byteLength, 0);
      if (length < record.headersLength) return null;
      const blob = concatBytes(values, length).subarray(
        0,
        record.headersLength,
      );
      try {
        const text = new TextDecoder("utf-8", { fatal: true }).decode(blob);
        headers = decodeHeaders(text);
      } catch {
        return null;
      }
    }
    const held = "set" in record ? record.bodyLength : record.body;
    const body = held === null ? null : new Uint8Array(0);
    const response = toStoredResponse(
      record.status,
      headers,
      body,
      record.omitted,
    );
    return response && response.headers;
  }

  /** The keys of every chunk under `slot`, whichever token wrote it (for `forget`). */
  async all(slot: string): Promise<Deno.KvKey[]> {
    const prefix = [...this.#prefix, "chunk", slot];
    return await unlocked(async () => {
      const keys: Deno.KvKey[] = [];
      for await (const entry of this.#kv.list({ prefix })) keys.push(entry.key);
      return keys;
    });
  }

  /** Writes chunks, as many per commit as fit, concurrently; deletes them on a failure. */
  async write(
    keys: Deno.KvKey[],
    parts: Uint8Array[],
    expireIn: number,
  ): Promise<void> {
    const ops = commitGroups(keys, parts).map((group) => {
      const op = this.#kv.atomic();
      for (const i of group) op.set(keys[i]!, parts[i]!, { expireIn });
      return op;
    });
    const results = await Promise.allSettled(
      ops.map((op) => unlocked(() => op.commit())),
    );
    for (const result of results) {
      if (result.status === "rejected") {
        await this.delete(keys);
        throw result.reason;
      }
    }
  }

  /** The keys of every chunk that `token` wrote for `slot`. */
  async written(slot: string, token: string): Promise<Deno.KvKey[]> {
    const prefix = [...this.#prefix, "chunk", slot, token];
    return await unlocked(async () => {
      const keys: Deno.KvKey[] = [];
      for await (const entry of this.#kv.list({ prefix })) keys.push(entry.key);
      return keys;
    });
  }

  /** Deletes the chunks a replaced record's token left, best effort. */
  async drop(slot: string, previous: KvRecord): Promise<void> {
    if (previous.state === "completed" && !("set" in previous)) return;
    try {
      await this.delete(await this.written(slot, previous.token));
    } catch {
      // Best effort: what is left expires a minute after its record.
    }
  }

  /** Deletes keys in batches, best effort: failures are left to expiry. */
  async delete(keys: Deno.KvKey[]): Promise<void> {
    const commits: Promise<unknown>[] = [];
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      const op = this.#kv.atomic();
      for (const key of keys.slice(i, i + DELETE_BATCH)) op.delete(key);
      commits.push(unlocked(() => op.commit()));
    }
    await Promise.allSettled(commits);
  }
}
