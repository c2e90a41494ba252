// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * DynamoDbStore against Powertools' `DynamoDBPersistenceLayer` (2.35.0), on
 * the same dynalite (started here, its own process) and the same SDK
 * (`@aws-sdk/client-dynamodb` 3.1162.0), each with a client of its own: a
 * new key and a replay, `inFlight` callers at once, calls/s and p50/p99, and
 * the DynamoDB requests per call counted by SDK middleware (each HTTP
 * attempt). Cases alternate over rounds (reversed every other round); each
 * figure is the median over the rounds.
 *
 * ```sh
 * deno run -A bench/dynamodb_compare.ts [seconds per case] [rounds] [in flight] [plain]
 * ```
 *
 * `plain`: dynalite as published, which drops
 * `ReturnValuesOnConditionCheckFailure`, so that both read a replay's item
 * with a second request (as Powertools for Python and .NET always do).
 *
 * @module
 */

import { CreateTableCommand } from "@aws-sdk/client-dynamodb";
// Powertools' DynamoDB layer needs the document client's marshalling (a peer).
import "@aws-sdk/lib-dynamodb";
import {
  IdempotencyConfig,
  makeIdempotent,
} from "@aws-lambda-powertools/idempotency";
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import { DynamoDbStore } from "../src/stores/dynamodb.ts";
import { startDynalite } from "../tests/_support/dynalite.ts";
import { jsonBody, storeSubject, type Subject } from "./_peers.ts";
import {
  interleaved,
  markdownTable,
  median,
  percentile,
  ratio,
} from "./_measure.ts";

const seconds = Number(Deno.args[0] ?? 2);
const rounds = Number(Deno.args[1] ?? 3);
const inFlight = Number(Deno.args[2] ?? 32);
const plain = Deno.args[3] === "plain";

await using dynalite = await startDynalite({ plain });
const body = jsonBody();

const oursClient = dynalite.client();
const store = new DynamoDbStore({ client: oursClient, table: "bench_ours" });
await store.migrate();
const ours = storeSubject(
  "DynamoDbStore",
  "claim PutItem (+ UpdateItem to complete)",
  store,
  body,
  () => {},
);

const ptClient = dynalite.client();
await ptClient.send(
  new CreateTableCommand({
    TableName: "bench_powertools",
    KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
    AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
    BillingMode: "PAY_PER_REQUEST",
  }),
);
const config = new IdempotencyConfig({ expiresAfterSeconds: 3600 });
config.registerLambdaContext(
  { getRemainingTimeInMillis: () => 60_000 } as never,
);
const pt = makeIdempotent(
  (event: { key: string; body: string }) =>
    Promise.resolve({ status: 201, body: event.body }),
  {
    persistenceStore: new DynamoDBPersistenceLayer({
      tableName: "bench_powertools",
      awsSdkV3Client: ptClient as never,
    }),
    config,
  },
);
const powertools: Subject = {
  name: "Powertools 2.35.0 (DynamoDBPersistenceLayer)",
  what:
    "PutItem (+ UpdateItem); no fencing, no lease renewal, JSON result only",
  fresh: (key) => pt({ key, body }),
  prime: (key) => pt({ key, body }),
  replay: (key) => pt({ key, body }),
  close: () => {},
};

const subjects = [
  { subject: ours, client: oursClient },
  { subject: powertools, client: ptClient },
];
type Kind = "new key" | "replay";
const cases = subjects.flatMap((s) =>
  (["new key", "replay"] as const).map((kind) => ({ ...s, kind }))
);
const results = new Map<
  string,
  { rate: number[]; p50: number[]; p99: number[]; requests: number[] }
>();
const id = (name: string, kind: Kind) => `${name}|${kind}`;

// The replayed keys, completed once before any round.
const primed = Array.from({ length: 256 }, (_, i) => `replay-${i}`);
for (const { subject } of subjects) {
  for (const key of primed) await subject.prime(key);
}

let fresh = 0;
await interleaved(cases, rounds, async ({ subject, client, kind }) => {
  const call = kind === "replay"
    ? (i: number) => subject.replay(primed[i % primed.length]!)
    : () => subject.fresh(`new-${fresh++}`);
  const latencies: number[] = [];
  let i = 0;
  const sentBefore = client.sent.length;
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (performance.now() < end) {
      const start = performance.now();
      await call(i++);
      latencies.push(performance.now() - start);
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  const r = results.get(id(subject.name, kind)) ??
    { rate: [], p50: [], p99: [], requests: [] };
  r.rate.push(latencies.length / wall);
  r.p50.push(percentile(latencies, 0.5));
  r.p99.push(percentile(latencies, 0.99));
  r.requests.push((client.sent.length - sentBefore) / latencies.length);
  results.set(id(subject.name, kind), r);
});

const rows: string[][] = [];
for (const kind of ["new key", "replay"] as const) {
  const base = results.get(id(powertools.name, kind))!;
  for (const { subject } of subjects) {
    const r = results.get(id(subject.name, kind))!;
    rows.push([
      kind,
      subject.name,
      median(r.rate).toFixed(0),
      median(r.p50).toFixed(2),
      median(r.p99).toFixed(2),
      median(r.requests).toFixed(2),
      `${ratio(median(r.rate), median(base.rate))}×`,
    ]);
  }
}
console.log(
  `dynalite ${
    plain
      ? "as published"
      : "with DynamoDB's ReturnValuesOnConditionCheckFailure"
  }, ${inFlight} in flight, ${rounds} rounds of ${seconds} s per case\n`,
);
console.log(markdownTable(
  [
    "case",
    "implementation",
    "calls/s",
    "p50 ms",
    "p99 ms",
    "requests/call",
    "calls/s vs Powertools",
  ],
  rows,
));
