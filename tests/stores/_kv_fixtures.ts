// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the KvStore tests share (`kv_test.ts`, `kv_limits_test.ts`): claim
 * options, readers of a claim's result, a key lister and {@linkcode spied},
 * a database wrapper that sees each commit and read.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ClaimResult, StoredResponse } from "../../src/store.ts";

export const encoder = new TextEncoder();
export const options = { fingerprint: "fp", leaseMs: 1_000, ttlMs: 60_000 };

export function tokenOf(result: ClaimResult): string {
  assert.equal(result.state, "acquired", JSON.stringify(result));
  return (result as { token: string }).token;
}

export function responseOf(result: ClaimResult): StoredResponse {
  assert.equal(result.state, "completed", `got ${result.state}`);
  return (result as { response: StoredResponse }).response;
}

export async function keysUnder(
  kv: Deno.Kv,
  prefix: Deno.KvKey,
): Promise<Deno.KvKey[]> {
  const keys: Deno.KvKey[] = [];
  for await (const entry of kv.list({ prefix })) keys.push(entry.key);
  return keys;
}

/** What a {@linkcode spied} database saw. */
export interface Spy {
  /** Every commit so far, in order, with the `expireIn` of each set. */
  commits: { sets: { key: Deno.KvKey; expireIn: number | undefined }[] }[];
  /**
   * Runs before a commit goes out, with whether it writes a record (a claim,
   * an extend or a completing flip) rather than chunks; may reject to fail it.
   */
  beforeCommit?: (writesRecord: boolean) => Promise<void>;
  /** How many keys each `getMany` asked for, in order, when given. */
  reads?: number[];
  /** The most `getMany` calls out at once. */
  mostReading?: number;
  /** Runs before each `get` goes out; may throw to fail it. */
  beforeGet?: () => void;
}

/**
 * Wraps a database so a test can see each commit and step in before one.
 * Only what KvStore calls is forwarded.
 */
export function spied(kv: Deno.Kv, spy: Spy): Deno.Kv {
  let reading = 0;
  return {
    get: async (key: Deno.KvKey) => {
      spy.beforeGet?.();
      return await kv.get(key);
    },
    getMany: async (keys: Deno.KvKey[]) => {
      spy.reads?.push(keys.length);
      reading++;
      spy.mostReading = Math.max(spy.mostReading ?? 0, reading);
      try {
        return await kv.getMany(keys);
      } finally {
        reading--;
      }
    },
    list: (selector: Deno.KvListSelector) => kv.list(selector),
    atomic: () => {
      const op = kv.atomic();
      const seen: Spy["commits"][number] = { sets: [] };
      const set = op.set.bind(op);
      const commit = op.commit.bind(op);
      op.set = (key, value, options) => {
        seen.sets.push({ key, expireIn: options?.expireIn });
        return set(key, value, options);
      };
      op.commit = async () => {
        spy.commits.push(seen);
        await spy.beforeCommit?.(seen.sets.some((s) => s.key.includes("rec")));
        return commit();
      };
      return op;
    },
  } as unknown as Deno.Kv;
}
