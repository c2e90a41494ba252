// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode DynamoDbStore}: idempotency records in an Amazon DynamoDB table,
 * through the AWS SDK for JavaScript v3 (`@aws-sdk/client-dynamodb`).
 *
 * @module
 */

import {
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { assertSlot, StoreError } from "../store.ts";
import type {
  ClaimOptions,
  ClaimResult,
  ForgetResult,
  IdempotencyStore,
  PeekOptions,
  PeekResult,
  StoredResponse,
  StoreEvent,
  StoreStats,
  WriteOutcome,
} from "../store.ts";
import { assertStoredResponse } from "../_record.ts";
import { SealCount } from "../_seal.ts";
import {
  knownOptions,
  optionalFunction,
  positiveInteger,
} from "../_validate.ts";
import { claimOptions, durationMs } from "./_shared.ts";
import type { Orphans } from "./_orphans.ts";
import {
  type Operation,
  serviceCalls,
  type StoreCall,
  type StoreCalls,
  timeoutOption,
} from "./_store_call.ts";
import * as rec from "./_dynamodb_item.ts";
import type { Item } from "./_dynamodb_item.ts";
import { migrateTable, type MigrationReport } from "./_dynamodb_migrate.ts";

export { INLINE_BYTES, MAX_CHUNKS } from "./_dynamodb_item.ts";
export type { MigrationReport } from "./_dynamodb_migrate.ts";

/** A `DynamoDBClient` of `@aws-sdk/client-dynamodb` (what the store calls). */
export interface DynamoDbClient {
  /** Sends one of the SDK's commands. */
  send(command: object): Promise<unknown>;
}

/** Options of the {@linkcode DynamoDbStore} constructor. */
export interface DynamoDbStoreOptions {
  /** The app's `DynamoDBClient` (its region, credentials, retries), never destroyed by the store. */
  client: DynamoDbClient;
  /** The table: 3 to 255 of `A-Z a-z 0-9 _ . -`. */
  table: string;
  /**
   * How long one operation may take, in ms, the SDK's retries included
   * (docs/architecture.md, "Store calls and deadlines"). @default {2000}
   */
  timeoutMs?: number;
  /**
   * The clock of leases and expiries, in milliseconds since the epoch:
   * DynamoDB has none (docs/dynamodb.md, "Clock"). @default {Date.now}
   */
  clock?: () => number;
  /** Receives each {@linkcode StoreEvent} (an undo's end); a throw is ignored. */
  onEvent?: (event: StoreEvent) => void;
}

const OPTIONS = ["client", "table", "timeoutMs", "clock", "onEvent"];
const TABLE = /^[A-Za-z0-9_.-]{3,255}$/;
const CLAIM_ATTEMPTS = 4;

/**
 * An {@linkcode IdempotencyStore} in a DynamoDB table, one item per slot. A
 * claim is one conditional `PutItem` that returns the item it found
 * (`ReturnValuesOnConditionCheckFailure`), so that a replay and a conflict are
 * one request; `complete`, `release` and `extend` are one request each,
 * conditional on the claim's token. Times are the app's clock (skew under
 * half a lease is covered: docs/dynamodb.md). A body that does not fit one
 * item goes to up to {@linkcode MAX_CHUNKS} more, written before the record.
 *
 * @example Guard a handler with records in DynamoDB
 * ```ts ignore
 * import { idempotency } from "@idempotent/http";
 * import { DynamoDbStore } from "@idempotent/http/dynamodb";
 * import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
 * import { accountOf } from "./auth.ts"; // request => the stable account id
 *
 * const store = new DynamoDbStore({ client: new DynamoDBClient({}), table: "idempotency" });
 * await store.migrate();
 * const handler = () => Response.json({ id: 1 }, { status: 201 });
 * Deno.serve(idempotency(handler, { store, scope: accountOf }));
 * ```
 */
export class DynamoDbStore implements IdempotencyStore {
  #client: DynamoDBClient;
  #table: string;
  #clock: () => number;
  #calls: StoreCalls;
  #orphans: Orphans;

  /**
   * Makes a store on an app's client; it sends nothing. Run
   * {@linkcode DynamoDbStore.migrate} once before use.
   *
   * @throws {TypeError} When `client` has no `send()`, `table` is invalid,
   * `clock` or `onEvent` is not a function, or an option is unknown.
   * @throws {RangeError} When `timeoutMs` is not a positive integer or
   * `Infinity`.
   */
  constructor(options: DynamoDbStoreOptions) {
    if (typeof options?.client?.send !== "function") {
      throw new TypeError(
        "'client' must be a DynamoDBClient: current value has no send()",
      );
    }
    knownOptions("DynamoDbStore", options, OPTIONS);
    if (typeof options.table !== "string" || !TABLE.test(options.table)) {
      throw new TypeError(
        `'table' must be 3 to 255 characters of A-Z a-z 0-9 _ . -: current value is ${
          JSON.stringify(options.table)
        }`,
      );
    }
    this.#client = options.client as DynamoDBClient;
    this.#table = options.table;
    this.#clock = optionalFunction("clock", options.clock) ?? Date.now;
    const timeoutMs = timeoutOption(options.timeoutMs, 2000);
    ({ calls: this.#calls, orphans: this.#orphans } = serviceCalls({
      service: "DynamoDB",
      timeoutMs,
      onEvent: optionalFunction("onEvent", options.onEvent),
      release: (slot, token) => this.release(slot, token),
      failed: (operation, cause) => failure(operation, cause, this.#table),
    }));
  }

  /** The table's name. */
  get table(): string {
    return this.#table;
  }

  /**
   * Creates the table (partition key `pk`, a string; on-demand) if absent and
   * waits until it is active, then enables TTL on `ttl`; or checks an existing
   * table and names what is wrong. Safe from several instances at once.
   *
   * @throws {Error} When the table's key is not `pk` (a string) alone, its
   * TTL is on another attribute, or DynamoDB refuses (no permission).
   */
  async migrate(): Promise<MigrationReport> {
    return await migrateTable(this.#client, this.#table);
  }

  /**
   * {@linkcode IdempotencyStore.claim}: one conditional `PutItem`; a replay
   * or a conflict comes back with the item it found. A body in chunks takes
   * one `BatchGetItem` more.
   */
  async claim(slot: string, options: ClaimOptions): Promise<ClaimResult> {
    assertSlot(slot);
    const { fingerprint, leaseMs, ttlMs } = claimOptions(options);
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const now = this.#clock();
      const token = rec.newToken(now + ttlMs, fingerprint);
      const item = rec.claimItem(slot, fingerprint, token, now, leaseMs, ttlMs);
      const acquired = (r?: ClaimResult) =>
        r?.state === "acquired" ? token : undefined;
      const undo = { slot, token, leaseMs, acquired, mayHaveRun };
      const put = (call: StoreCall) => this.#put(call, item, token, now);
      const found = await this.#calls.run("claim", put, undo);
      if (found !== undefined) return found; // else changed under us: again
    }
    return { state: "in_flight", fingerprint: null, retryAfterMs: 1 };
  }

  /** A claim's put, and what it found; `undefined` when that changed before it could be read. */
  async #put(call: StoreCall, item: Item, token: string, now: number) {
    let old: Item | undefined;
    try {
      const { Attributes: took } = await this.#client.send(
        new PutItemCommand({
          TableName: this.#table,
          Item: item,
          ...expression(rec.FREE, now, { ":S": { S: "S" } }),
          ReturnValues: "ALL_OLD",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      // Took over a lease that ran out within its TTL, or a free slot.
      const expires = took === undefined ? null : rec.fieldsOf(took).expiresAt;
      const recovered = expires !== null && expires > now;
      return { state: "acquired", token, recovered } as const;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      old = error.Item;
    }
    call.throwIfExpired();
    // An endpoint without ReturnValuesOnConditionCheckFailure (dynalite):
    // the item read again, and judged at the same now.
    old ??= await this.#get(item[rec.KEY_ATTRIBUTE]!.S!);
    if (old === undefined || rec.isFree(old, now)) return undefined;
    if (rec.chunksOf(old) === 0) return rec.decodeClaim(old, now);
    call.throwIfExpired();
    const chunks = await this.#chunks(old);
    return chunks && rec.decodeClaim(old, now, chunks);
  }

  /**
   * {@linkcode IdempotencyStore.complete}: one fenced `UpdateItem`; a body
   * that does not fit the record, a `PutItem` per chunk before it.
   */
  async complete(
    slot: string,
    token: string,
    response: StoredResponse,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    assertStoredResponse(response);
    const done = rec.completion(slot, String(token), response);
    const { update, values, chunks } = done;
    const TableName = this.#table;
    const put = (Item: Item) => new PutItemCommand({ TableName, Item });
    // The chunks first, keyed by the token: nothing reads them until the
    // fenced update (the commit point) names them; a lost one deletes them.
    return await this.#fenced("complete", slot, token, update, values, {
      before: () => Promise.all(chunks.map((c) => this.#client.send(put(c)))),
      lost: async () => {
        if (chunks.length === 0) return;
        await this.#client.send(deletes(TableName, chunks)).catch(() => {});
      },
    });
  }

  /** {@linkcode IdempotencyStore.release}: one fenced `DeleteItem`. */
  async release(slot: string, token: string): Promise<WriteOutcome> {
    assertSlot(slot);
    return await this.#fenced("release", slot, token);
  }

  /** {@linkcode IdempotencyStore.extend}: one fenced `UpdateItem`, the lease from the app's now. */
  async extend(
    slot: string,
    token: string,
    leaseMs: number,
  ): Promise<WriteOutcome> {
    assertSlot(slot);
    leaseMs = durationMs("leaseMs", leaseMs);
    const until = { ":ls": { N: String(this.#clock() + leaseMs) } };
    const set = "SET #lease_until = :ls";
    return await this.#fenced("extend", slot, token, set, until);
  }

  /** {@linkcode IdempotencyStore.subscribe}: the end of each undo ({@linkcode StoreEvent}). */
  subscribe(listener: (event: StoreEvent) => void): void {
    this.#orphans.subscribe(listener);
  }

  /**
   * {@linkcode IdempotencyStore.peek}: one consistent `GetItem` (a body in
   * chunks: its length from the record; with `response: true`, read too).
   */
  async peek(slot: string, options?: PeekOptions): Promise<PeekResult> {
    assertSlot(slot);
    const full = options?.response === true;
    return await this.#calls.run("peek", async (call) => {
      const now = this.#clock();
      const item = await this.#get(slot);
      if (!full || item === undefined || rec.chunksOf(item) === 0) {
        return rec.decodePeek(item, now, full);
      }
      call.throwIfExpired();
      const chunks = await this.#chunks(item);
      if (chunks === undefined) throw new Error("a chunk is gone");
      return rec.decodePeek(item, now, full, chunks);
    });
  }

  /**
   * {@linkcode IdempotencyStore.forget}: one `DeleteItem` (an expired item is
   * absent already, deleted all the same), and its body's chunks after it.
   */
  async forget(slot: string): Promise<ForgetResult> {
    assertSlot(slot);
    return await this.#calls.run("forget", async () => {
      const now = this.#clock();
      const { Attributes: old } = await this.#client.send(
        new DeleteItemCommand({ ...this.#key(slot), ReturnValues: "ALL_OLD" }),
      );
      if (old === undefined) return "absent";
      const chunks = rec.chunkKeys(old);
      if (chunks.length > 0) {
        await this.#client.send(deletes(this.#table, chunks));
      }
      const expires = rec.fieldsOf(old).expiresAt;
      return expires !== null && expires <= now ? "absent" : "deleted";
    });
  }

  /**
   * {@linkcode IdempotencyStore.stats}: a consistent `Scan`, page after page,
   * that stops once it has read `limit` items (default 10,000; `exact:
   * false` then); each page is one request and 0.5 RCU per 4 KB read.
   *
   * @throws {RangeError} When `limit` is not a positive integer.
   */
  async stats(options?: { limit?: number }): Promise<StoreStats> {
    const limit = positiveInteger("limit", options?.limit ?? 10_000);
    return await this.#calls.run("stats", async (call) => {
      const now = this.#clock();
      const counts = { inFlight: 0, completed: 0, unreadable: 0 };
      const sealed = new SealCount();
      let read = 0;
      let start: Item | undefined;
      do {
        call.throwIfExpired();
        const page = await this.#client.send(
          new ScanCommand({
            TableName: this.#table,
            ConsistentRead: true,
            Limit: Math.min(1000, limit - read),
            ExclusiveStartKey: start,
          }),
        );
        start = page.LastEvaluatedKey;
        for (const item of page.Items ?? []) {
          read++;
          if (item.pk?.S?.startsWith(rec.CHUNK_PREFIX)) continue;
          const found = rec.decodePeek(item, now, false);
          if (found.state === "in_flight") counts.inFlight++;
          else if (found.state === "unreadable") counts.unreadable++;
          else if (found.state === "completed") {
            counts.completed++;
            sealed.add(item.headers?.S ?? "");
          }
        }
      } while (start !== undefined && read < limit);
      return { ...counts, exact: start === undefined, ...sealed.counts };
    });
  }

  #key(slot: string) {
    return {
      TableName: this.#table,
      Key: { [rec.KEY_ATTRIBUTE]: { S: slot } },
    };
  }

  /** A consistent read of the slot's item. */
  async #get(slot: string): Promise<Item | undefined> {
    const get = new GetItemCommand({
      ...this.#key(slot),
      ConsistentRead: true,
    });
    return (await this.#client.send(get)).Item;
  }

  /** The chunks of a completed `item`'s body, in order; `undefined` when one is gone. */
  async #chunks(item: Item): Promise<Item[] | undefined> {
    const keys = rec.chunkKeys(item);
    const found = new Map<string, Item>();
    const id = (key: Item) => key[rec.KEY_ATTRIBUTE]?.S ?? "";
    let wanted: Item[] | undefined = keys;
    while (wanted !== undefined && wanted.length > 0) {
      const answer: BatchGetItemCommandOutput = await this.#client.send(
        new BatchGetItemCommand({
          RequestItems: {
            [this.#table]: { Keys: wanted, ConsistentRead: true },
          },
        }),
      );
      for (const part of answer.Responses?.[this.#table] ?? []) {
        found.set(id(part), part);
      }
      wanted = answer.UnprocessedKeys?.[this.#table]?.Keys;
    }
    const parts = keys.map((key) => found.get(id(key)));
    return parts.includes(undefined) ? undefined : parts as Item[];
  }

  /** A write of `slot` conditional on `token` (an update, or else a delete). */
  async #fenced(
    operation: "complete" | "release" | "extend",
    slot: string,
    token: string,
    update?: string,
    values: Item = {},
    around?: { before(): Promise<unknown>; lost(): Promise<void> },
  ): Promise<WriteOutcome> {
    return await this.#calls.run(operation, async (call) => {
      await around?.before();
      call.throwIfExpired();
      const fence = { ...values, ":tk": { S: String(token) } };
      const at = expression(rec.FENCE, this.#clock(), fence, update);
      const input = { ...this.#key(slot), ...at, UpdateExpression: update };
      try {
        await this.#client.send(
          (update === undefined
            ? new DeleteItemCommand({ ...this.#key(slot), ...at })
            : new UpdateItemCommand(input)) as UpdateItemCommand,
        );
        return "applied";
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
        await around?.lost();
        return "lost";
      }
    });
  }
}

/** A condition (and an update) with the names and values they use. */
function expression(condition: string, now: number, values: Item, update = "") {
  return {
    ConditionExpression: condition,
    ExpressionAttributeNames: rec.namesOf(condition, update),
    ExpressionAttributeValues: { ...rec.conditionValues(now), ...values },
  };
}

/** One request deleting the items of `keys` (at most 25: {@linkcode MAX_CHUNKS} is 8). */
function deletes(table: string, keys: readonly Item[]): BatchWriteItemCommand {
  const requests = keys.map(({ pk }) => ({
    DeleteRequest: { Key: { pk: pk! } },
  }));
  return new BatchWriteItemCommand({ RequestItems: { [table]: requests } });
}

/**
 * Whether a failed claim may have been written: not when DynamoDB answered
 * a client error (a refused request changes nothing) or no connection was
 * made; a server error or a broken connection may hide a write.
 */
function mayHaveRun(error: unknown): boolean {
  const { $fault, code } = (error ?? {}) as Record<string, unknown>;
  if ($fault === "client") return false;
  return code !== "ECONNREFUSED";
}

const WRITES = new Set<Operation>(["complete", "release", "extend", "forget"]);

/** A failed call's error, with what to do when the table is missing. */
function failure(operation: Operation, cause: unknown, table: string) {
  const { name, message } = cause instanceof Error
    ? cause
    : { name: "", message: String(cause) };
  const reason = name ? `${name}: ${message}` : message;
  const fix = name === "ResourceNotFoundException"
    ? `: run \`await store.migrate()\` for the table "${table}" before serving`
    : "";
  const unknown = WRITES.has(operation) ? " (outcome unknown)" : "";
  return new StoreError(
    `DynamoDB ${operation} failed${unknown}: ${reason}${fix}`,
    { operation, cause },
  );
}
