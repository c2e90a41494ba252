// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the DynamoDbStore tests share: a store on a private dynalite with a
 * table of its own and an app clock the test moves, and items planted that
 * no store wrote.
 *
 * @module
 */

import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import {
  DynamoDbStore,
  type MigrationReport,
} from "../../src/stores/dynamodb.ts";
import type { ClaimOptions } from "../../src/store.ts";
import type { PoisonKind } from "../../src/testing/testing.ts";
import { type PrivateDynalite, startDynalite } from "../_support/dynalite.ts";

/** What {@linkcode dynamoStore} makes. */
export interface DynamoFixture {
  store: DynamoDbStore;
  client: ReturnType<PrivateDynalite["client"]>;
  table: string;
  migration: MigrationReport;
  time: { now: number };
  elapse(ms: number): Promise<void>;
  poison(slot: string, kind: PoisonKind): Promise<void>;
}

/** A migrated store on `dynalite` (its own table), on a clock the test moves. */
export async function dynamoStore(
  dynalite: PrivateDynalite,
  options: { timeoutMs?: number; maxAttempts?: number } = {},
): Promise<DynamoFixture> {
  const client = dynalite.client(options.maxAttempts);
  const time = { now: 1_800_000_000_000 };
  const table = `dynamo_${crypto.randomUUID().slice(0, 8)}`;
  const store = new DynamoDbStore({
    client,
    table,
    clock: () => time.now,
    ...(options.timeoutMs === undefined
      ? {}
      : { timeoutMs: options.timeoutMs }),
  });
  const migration = await store.migrate();
  client.sent.length = 0;
  return {
    store,
    client,
    table,
    migration,
    time,
    elapse(ms: number) {
      time.now += ms;
      return Promise.resolve();
    },
    /** Writes at `slot` an item no DynamoDbStore wrote. */
    async poison(slot: string, kind: PoisonKind) {
      const random = crypto.getRandomValues(new Uint8Array(32));
      const items = {
        garbage: { pk: { S: slot }, v: { B: random } },
        truncated: {
          pk: { S: slot },
          v: { N: "1" },
          state: { S: "completed" },
          fingerprint: { S: "f" },
          expires_at: { N: String(time.now + 60_000) },
        },
        "future_version": {
          pk: { S: slot },
          v: { N: "2" },
          state: { S: "in_flight" },
          fingerprint: { S: "f" },
          token: { S: "t" },
          lease_until: { N: String(time.now - 1) },
          expires_at: { N: String(time.now + 60_000) },
        },
      };
      await client.send(
        new PutItemCommand({ TableName: table, Item: items[kind] }),
      );
    },
  };
}

/** One dynalite for a file's tests (patched, or `plain`), stopped on unload. */
export function sharedDynalite(plain = false): () => Promise<PrivateDynalite> {
  let started: Promise<PrivateDynalite> | undefined;
  globalThis.addEventListener("unload", () => {
    started?.then((d) => d.stop());
  });
  return () => started ??= startDynalite({ plain });
}

/** Claim options with `fingerprint`, a 30 s lease and a 60 s TTL. */
export const opts = (
  fingerprint: string,
  more: Partial<ClaimOptions> = {},
): ClaimOptions => ({ fingerprint, leaseMs: 30_000, ttlMs: 60_000, ...more });
