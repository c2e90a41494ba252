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
  /** Whether this call created the table. */
  table: "created" | "exists";
  /** Whether DynamoDB deletes expired items (by the `ttl` attribute). */
  ttl: "enabled" | "unsupported";
}

const named = (error: unknown, ...names: string[]) =>
  names.includes((error as { name?: string } | null)?.name ?? "");

/** Creates or checks `table` (see {@linkcode MigrationReport}). */
export async function migrateTable(
  client: DynamoDBClient,
  table: string,
): Promise<MigrationReport> {
  const TableName = table;
  const describe = async () =>
    (await client.send(new DescribeTableCommand({ TableName }))).Table;
  let found: TableDescription | undefined = await describe().catch((e) => {
    if (named(e, "ResourceNotFoundException")) return undefined;
    throw e;
  });
  const created = found === undefined;
  if (created) {
    await client.send(
      new CreateTableCommand({
        TableName,
        KeySchema: [{ AttributeName: key, KeyType: "HASH" }],
        AttributeDefinitions: [{ AttributeName: key, AttributeType: "S" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    ).catch((error) => {
      // Another instance's migration created it meanwhile.
      if (!named(error, "ResourceInUseException")) throw error;
    });
    found = await describe();
  }
  for (let waited = 0; found?.TableStatus === "CREATING"; waited += 500) {
    if (waited >= 120_000) throw new Error(`Table ${table} is still CREATING`);
    await delay(500);
    found = await describe();
  }
  checkKey(table, found);
  const status = await client.send(
    new DescribeTimeToLiveCommand({ TableName }),
  );
  const { TimeToLiveStatus: on, AttributeName } =
    status.TimeToLiveDescription ??
      {};
  const report = {
    table: created ? "created" : "exists",
    ttl: "enabled",
  } as const;
  if (on === "ENABLED" || on === "ENABLING") {
    if (AttributeName === ttl) return report;
    throw new Error(
      `Table ${table} has TTL on "${AttributeName}": DynamoDbStore needs it on "${ttl}" (a table has one TTL attribute; use a table of its own)`,
    );
  }
  const spec = { AttributeName: ttl, Enabled: true };
  const update = new UpdateTimeToLiveCommand({
    TableName,
    TimeToLiveSpecification: spec,
  });
  return await client.send(update).then(() => report, (error) => {
    if (named(error, "UnknownOperationException")) {
      return { ...report, ttl: "unsupported" } as const;
    }
    // Another instance's migration is enabling it.
    if (/already enabled|in progress/i.test(String(error))) return report;
    throw error;
  });
}

/** Throws unless the table's key is `pk`, a string, alone. */
function checkKey(table: string, found: TableDescription | undefined): void {
  const schema = found?.KeySchema ?? [];
  const type = found?.AttributeDefinitions?.find((d) => d.AttributeName === key)
    ?.AttributeType;
  if (
    schema.length === 1 && schema[0]?.AttributeName === key &&
    schema[0]?.KeyType === "HASH" && type === "S"
  ) return;
  const has = schema.map((k) => `${k.AttributeName} (${k.KeyType})`).join(", ");
  throw new Error(
    `Table ${table} has the key ${
      has || "(none)"
    }: DynamoDbStore needs the partition key "${key}" (a string) alone; give it a table of its own`,
  );
}
