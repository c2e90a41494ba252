// Copyright 2026 the @idempotent/http authors. MIT license.
/** DynamoDbStore's `migrate()`: the table and its TTL, created or checked. @module */

import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  type TableDescription,
  UpdateTimeToLiveCommand,
} from "@aws-sdk/client-dynamodb";
import { delay } from "../_async.ts";
import {
  KEY_ATTRIBUTE as key,
  TTL_ATTRIBUTE as ttl,
} from "./_dynamodb_item.ts";

/**
 * What {@linkcode DynamoDbStore.migrate} found or did: the table `created`
 * or found (`exists`); its TTL `enabled` (now or before) or `unsupported`,
 * when the endpoint does not know `UpdateTimeToLive` (an emulator such as
 * dynalite): records still expire for the store, only nothing deletes them.
 */
export interface MigrationReport {
  table: "created" | "exists";
  ttl: "enabled" | "unsupported";
}

const named = (error: unknown, name: string) =>
  (error as { name?: unknown } | null)?.name === name;

/** Creates or checks `table` (see {@linkcode MigrationReport}). */
export async function migrateTable(
  client: DynamoDBClient,
  table: string,
): Promise<MigrationReport> {
  const describe = async () =>
    (await client.send(new DescribeTableCommand({ TableName: table })))
      .Table;
  let found: TableDescription | undefined;
  let created = false;
  try {
    found = await describe();
  } catch (error) {
    if (!named(error, "ResourceNotFoundException")) throw error;
    try {
      await client.send(
        new CreateTableCommand({
          TableName: table,
          KeySchema: [{ AttributeName: key, KeyType: "HASH" }],
          AttributeDefinitions: [{ AttributeName: key, AttributeType: "S" }],
          BillingMode: "PAY_PER_REQUEST",
        }),
      );
      created = true;
    } catch (error) {
      // Another instance's migration created it meanwhile.
      if (!named(error, "ResourceInUseException")) throw error;
    }
    found = await describe();
  }
  for (let waited = 0; found?.TableStatus === "CREATING"; waited += 500) {
    if (waited >= 120_000) throw new Error(`Table ${table} is still CREATING`);
    await delay(500);
    found = await describe();
  }
  checkKey(table, found, key);
  return { table: created ? "created" : "exists", ttl: await enableTtl() };

  async function enableTtl(): Promise<MigrationReport["ttl"]> {
    let description;
    try {
      ({ TimeToLiveDescription: description } = await client.send(
        new DescribeTimeToLiveCommand({ TableName: table }),
      ));
    } catch (error) {
      if (named(error, "UnknownOperationException")) return "unsupported";
      throw error;
    }
    const status = description?.TimeToLiveStatus;
    const on = description?.AttributeName;
    if (status === "ENABLED" || status === "ENABLING") {
      if (on === ttl) return "enabled";
      throw new Error(
        `Table ${table} has TTL on ${
          JSON.stringify(on)
        }: DynamoDbStore needs it on "${ttl}" (a table has one TTL attribute; use a table of its own)`,
      );
    }
    try {
      await client.send(
        new UpdateTimeToLiveCommand({
          TableName: table,
          TimeToLiveSpecification: { AttributeName: ttl, Enabled: true },
        }),
      );
    } catch (error) {
      if (named(error, "UnknownOperationException")) return "unsupported";
      // Another instance's migration is enabling it.
      if (!/TimeToLive is already enabled|in progress/i.test(String(error))) {
        throw error;
      }
    }
    return "enabled";
  }
}

/** Throws unless the table's key is `key`, a string, alone. */
function checkKey(
  table: string,
  found: TableDescription | undefined,
  key: string,
): void {
  const schema = found?.KeySchema ?? [];
  const type = found?.AttributeDefinitions?.find((d) => d.AttributeName === key)
    ?.AttributeType;
  const ok = schema.length === 1 && schema[0]?.AttributeName === key &&
    schema[0]?.KeyType === "HASH" && type === "S";
  if (ok) return;
  const has = schema.map((k) => `${k.AttributeName} (${k.KeyType})`).join(", ");
  throw new Error(
    `Table ${table} has the key ${
      has || "(none)"
    }: DynamoDbStore needs the partition key "${key}" (a string) alone; give it a table of its own`,
  );
}
