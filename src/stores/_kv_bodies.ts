// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * KvStore's chunk values on Deno KV: reading a completed record's response,
 * writing a large one's chunks, deleting what a token wrote.
 *
 * @module
 */

import type { StoredResponse } from "../store.ts";
import { toStoredResponse } from "../_record.ts";
import {
  assemble,
  type ChunkedRecord,
  commitGroups,
  GET_MANY,
  type InlineRecord,
  type KvRecord,
  READ_WINDOW,
} from "./_kv_chunks.ts";
import { unlocked } from "./_kv_unlocked.ts";

/** Deletes per cleanup commit (Deno KV's limit is 1000 mutations). */
export const DELETE_BATCH = 500;

/** The bodies of one KvStore: chunk values under `[...prefix, "chunk"]`. */
export class KvBodies {
  #kv: Deno.Kv;
  #prefix: Deno.KvKey;

  /**
   * @param kv The database.
   * @param prefix The store's key prefix.
   */
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
      return toStoredResponse(
        record.status,
        record.headers,
        record.body,
        record.omitted,
      );
    }
    // Chunks are read a window at a time and the read stops at the first
    // missing or surplus byte, so that what a reader allocates is bounded by
    // what is really stored, whatever counts a hostile value claims.
    const total = record.headersLength + (record.bodyLength ?? 0);
    const values: Uint8Array[] = [];
    let length = 0;
    for (let first = 0; first < record.chunks; first += READ_WINDOW) {
      const batches: Deno.KvKey[][] = [];
      const end = Math.min(record.chunks, first + READ_WINDOW);
      for (let i = first; i < end; i += GET_MANY) {
        batches.push(
          Array.from(
            { length: Math.min(GET_MANY, end - i) },
            (_, j) => this.key(slot, record.token, record.set, i + j),
          ),
        );
      }
      const entries = (await Promise.all(
        batches.map((batch) => unlocked(() => this.#kv.getMany(batch))),
      )).flat();
      for (const entry of entries) {
        if (!(entry.value instanceof Uint8Array)) return null;
        length += entry.value.byteLength;
        if (length > total) return null;
        values.push(entry.value);
      }
    }
    return assemble(record, values, length);
  }

  /** Writes chunk values, as many per commit as fit, the commits concurrently. */
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
      if (result.status === "rejected") throw result.reason;
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
