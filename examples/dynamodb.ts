// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The README's DynamoDbStore line as a whole server, on 127.0.0.1:8000, with
 * its records in the DynamoDB table `DYNAMODB_TABLE` (default
 * `idempotency`), through a client of the app's: its region and credentials
 * from the environment as the AWS SDK reads them, `DYNAMODB_ENDPOINT` for a
 * local endpoint (DynamoDB Local, dynalite). Nothing to sweep: DynamoDB's
 * TTL deletes expired records.
 *
 *     deno run --allow-net --allow-env --allow-read --allow-sys examples/dynamodb.ts
 *
 * @module
 */
import { accountOf, handler } from "./_payments.ts";
import { idempotency } from "@idempotent/http";
import { DynamoDbStore } from "@idempotent/http/dynamodb";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";

const endpoint = Deno.env.get("DYNAMODB_ENDPOINT");
const client = new DynamoDBClient(endpoint ? { endpoint } : {});
const table = Deno.env.get("DYNAMODB_TABLE") ?? "idempotency";
const store = new DynamoDbStore({ client, table });
await store.migrate(); // the table and its TTL, once; safe from every instance
Deno.serve(
  { hostname: "127.0.0.1", port: 8000 },
  // Scoped by the account the request acts for, resolved after authentication.
  idempotency(handler, { store, scope: accountOf }),
);
