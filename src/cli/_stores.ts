// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The stores of `@idempotent/http/cli`, opened from a checked target: Redis
 * (a Redis Cluster routed by slot, named or detected), PostgreSQL, MySQL, SQLite or Deno KV
 * (docs/architecture.md, Inspect and forget). Drivers are imported only for
 * the store named.
 * @module
 */

import type {
  DynamoDbTarget,
  MysqlTarget,
  OneTarget,
  PostgresTarget,
  RedisTarget,
} from "./_args.ts";
import { UsageError } from "./_args.ts";
import type { PeekResult, StoreStats } from "../store.ts";
import { within } from "../_async.ts";
import { messageOf } from "../_validate.ts";
import { KvStore } from "../stores/kv.ts";
import { MysqlStore } from "../stores/mysql.ts";
import { PostgresStore } from "../stores/postgres.ts";
import { RedisStore } from "../stores/redis.ts";
import type { SqliteStore } from "../stores/sqlite.ts";
import type { DynamoDbStore } from "../stores/dynamodb.ts";

/** One opened store: what the CLI calls, and how to close it. */
export interface Opened {
  store:
    | RedisStore
    | PostgresStore
    | MysqlStore
    | KvStore
    | SqliteStore
    | DynamoDbStore;
  /** The store's `stats`, or on a Redis Cluster a count over every master. */
  stats(limit: number | undefined): Promise<StoreStats>;
  close(): Promise<unknown>;
  /** A line for stderr about how the store was reached. */
  note?: string;
}

/** Generous: a stats scan or count may take a while on a large store. */
const TIMEOUT_MS = 30_000;

/** The store's place, without credentials. */
export function where(target: OneTarget): string {
  if (target.kind === "kv") return `Deno KV at ${target.url}`;
  if (target.kind === "dynamodb") {
    const { endpoint, region } = target.options;
    const at = endpoint
      ? ` at ${URL.parse(endpoint)?.host}`
      : region
      ? ` in ${region}`
      : "";
    return `DynamoDB table ${target.url}${at}`;
  }
  if (target.kind === "sqlite") return `SQLite at ${target.url}`;
  const name = target.kind === "postgres"
    ? "PostgreSQL"
    : target.kind === "mysql"
    ? "MySQL"
    : target.nodes
    ? "Redis Cluster"
    : "Redis";
  const host = URL.parse(target.url)?.host;
  return host ? `${name} at ${host}` : name;
}

/** An error's message and those of its causes that it does not include. */
export function causes(error: unknown): string {
  const parts: string[] = [];
  for (let e = error; e !== undefined && parts.length < 4;) {
    const text = messageOf(e) || (e instanceof Error ? e.name : "");
    if (!parts.some((part) => part.includes(text))) parts.push(text);
    e = e instanceof AggregateError && e.errors.length > 0
      ? e.errors[0]
      : e instanceof Error
      ? e.cause
      : undefined;
  }
  const all = parts.join(": ");
  // The store's message says to run store.migrate(); the table may be wrong.
  return /relation .* does not exist|Table .* doesn't exist|no such table/.test(
      all,
    )
    ? `${all} (is --table the app's?)`
    : all;
}

/** Makes a store; its option errors (TypeError, RangeError) are usage errors. */
function made<S>(make: () => S): S {
  try {
    return make();
  } catch (error) {
    const option = error instanceof TypeError || error instanceof RangeError;
    throw option ? new UsageError(error.message) : error;
  }
}

/** Opens the target's store; throws when it is unreachable. */
export async function open(target: OneTarget): Promise<Opened> {
  if (target.kind === "redis") return await openRedis(target);
  if (target.kind === "postgres") return await openPostgres(target);
  if (target.kind === "mysql") return await openMysql(target);
  if (target.kind === "dynamodb") return await openDynamoDb(target);
  if (!/^[a-z]+:\/\//.test(target.url)) {
    // Opening a missing file would create it.
    await Deno.stat(target.url).catch((cause) => {
      throw new Error("no such file", { cause });
    });
  }
  if (target.kind === "sqlite") {
    const { SqliteStore } = await import("../stores/sqlite.ts"); // node:sqlite
    const { url: database, options } = target;
    const store = made(() =>
      new SqliteStore({ database, timeoutMs: TIMEOUT_MS, ...options })
    );
    const close = () => Promise.resolve(store.close());
    return { store, stats: () => store.stats(), close };
  }
  const kv = await Deno.openKv(target.url);
  const store = new KvStore({ kv, timeoutMs: TIMEOUT_MS, ...target.options });
  return {
    store,
    stats: (limit) => store.stats(limit === undefined ? {} : { limit }),
    close: () => Promise.resolve(kv.close()),
  };
}

/** A SQL store once `probe` answered: unreachable, not failed, when it throws. */
async function probed(
  store: PostgresStore | MysqlStore,
  probe: () => Promise<unknown>,
  close: () => Promise<unknown>,
): Promise<Opened> {
  await probe().catch(async (error) => {
    await close();
    throw error;
  });
  return { store, stats: () => store.stats(), close };
}

/**
 * A DynamoDbStore on a client made as the app's would be (credentials and a
 * region from the environment unless given), once the table answered.
 */
async function openDynamoDb(target: DynamoDbTarget): Promise<Opened> {
  const { DynamoDBClient, DescribeTableCommand } = await import(
    "@aws-sdk/client-dynamodb"
  );
  const { DynamoDbStore } = await import("../stores/dynamodb.ts");
  const client = new DynamoDBClient({ ...target.options, maxAttempts: 2 });
  const close = () => Promise.resolve(client.destroy());
  const table = target.url;
  const store = made(() =>
    new DynamoDbStore({ client, table, timeoutMs: TIMEOUT_MS })
  );
  await client.send(new DescribeTableCommand({ TableName: table })).catch(
    async (error) => {
      await close();
      throw error;
    },
  );
  return {
    store,
    stats: (limit) => store.stats(limit === undefined ? {} : { limit }),
    close,
  };
}

async function openPostgres(target: PostgresTarget): Promise<Opened> {
  const { default: postgres } = await import("postgres");
  const sql = postgres(target.url, {
    max: 1,
    connect_timeout: 5,
    onnotice: () => {},
  });
  const close = () => sql.end({ timeout: 1 });
  const options = { sql, timeoutMs: TIMEOUT_MS, ...target.options };
  const store = made(() => new PostgresStore(options)); // connects nothing
  return await probed(store, () => sql`SELECT 1`, close);
}

async function openMysql(target: MysqlTarget): Promise<Opened> {
  const { default: mysql } = await import("mysql2/promise");
  const pool = mysql.createPool({
    uri: target.url,
    connectionLimit: 1,
    connectTimeout: 5000,
  });
  const close = () => pool.end();
  const options = { pool, timeoutMs: TIMEOUT_MS, ...target.options };
  const store = made(() => new MysqlStore(options)); // connects nothing
  return await probed(store, () => pool.query("SELECT 1"), close);
}

const SOCKET = { connectTimeout: 5000, reconnectStrategy: false as const };

/**
 * A plain client for `--redis`, unless its node says `cluster_enabled:1`:
 * then, as for `--redis-cluster`, a cluster client from that node, so that
 * the app's one URL is enough (a node alone answers MOVED for others' keys).
 */
async function openRedis(target: RedisTarget): Promise<Opened> {
  const { createClient, createCluster } = await import("redis");
  const options = { timeoutMs: TIMEOUT_MS, ...target.options };
  let note: string | undefined;
  if (target.nodes === undefined) {
    const client = createClient({ url: target.url, socket: SOCKET });
    client.on("error", () => {}); // each failed command rejects with it
    const store = made(() => new RedisStore({ client, ...options }));
    await client.connect();
    const info = await client.sendCommand(["INFO", "cluster"]).catch(() => "");
    if (!/cluster_enabled:1/.test(String(info))) {
      return {
        store,
        stats: (limit) => store.stats(limit === undefined ? {} : { limit }),
        close: () => Promise.resolve(client.destroy()),
      };
    }
    client.destroy();
    note = `note: ${
      where(target)
    } is a Redis Cluster node: keys are routed by slot (as --redis-cluster)`;
  }
  const nodes = target.nodes ?? [target.url];
  const first = new URL(nodes[0]!);
  const credentials = {
    ...(first.username && { username: decodeURIComponent(first.username) }),
    ...(first.password && { password: decodeURIComponent(first.password) }),
  };
  const socket = first.protocol === "rediss:"
    ? { ...SOCKET, tls: true as const }
    : SOCKET;
  const cluster = createCluster({
    rootNodes: nodes.map((url) => ({ url })),
    // Nodes the cluster names are reached as the first URL says.
    defaults: { ...credentials, socket },
  });
  cluster.on("error", () => {});
  const store = made(() => new RedisStore({ client: cluster, ...options }));
  await cluster.connect();
  const prefix = target.options.prefix ?? "idempotency:";
  return {
    store,
    stats: (limit) => clusterStats(cluster, store, prefix, limit ?? 10_000),
    close: () => Promise.resolve(cluster.destroy()),
    ...(note && { note }),
  };
}

/** What clusterStats needs of a node-redis cluster. */
interface ClusterLike {
  readonly masters: unknown[];
  nodeClient(master: never): Promise<{
    sendCommand(args: string[]): Promise<unknown>;
  }>;
}

/**
 * Counts a cluster's records: `SCAN` of the prefix on each master (a scan
 * sees one node), at most `limit` keys in all (`exact: false` when it stopped
 * there), each key counted by a `peek` through the cluster, which routes it.
 */
export async function clusterStats(
  cluster: ClusterLike,
  store: RedisStore,
  prefix: string,
  limit: number,
): Promise<StoreStats> {
  const match = prefix.replace(/[*?[\]\\]/g, "\\$&") + "*";
  const keys = new Set<string>();
  let exact = true;
  for (const master of cluster.masters) {
    const node = await cluster.nodeClient(master as never);
    let cursor = "0";
    do {
      const scan = ["SCAN", cursor, "MATCH", match, "COUNT", "1000"];
      // A SCAN has no deadline of its own.
      const answer = await within(node.sendCommand(scan), TIMEOUT_MS);
      if (answer === undefined) {
        throw new Error(`SCAN did not answer within ${TIMEOUT_MS} ms`);
      }
      const [next, found] = answer as [string, string[]];
      cursor = String(next);
      for (const key of found) {
        if (keys.size >= limit && !keys.has(key)) exact = false;
        else keys.add(key);
      }
    } while (cursor !== "0" && exact);
  }
  const counts = { inFlight: 0, completed: 0, unreadable: 0 };
  const all = [...keys];
  for (let i = 0; i < all.length; i += 100) {
    const peeks = all.slice(i, i + 100).map((key) =>
      store.peek(key.slice(prefix.length)).catch((error) => {
        // A key too long for a slot is no record of ours.
        if (error instanceof TypeError) return { state: "unreadable" } as const;
        throw error;
      })
    );
    for (
      const { state } of await Promise.all<Pick<PeekResult, "state">>(peeks)
    ) {
      if (state === "in_flight") counts.inFlight++;
      else if (state !== "absent") counts[state]++; // absent: expired since
    }
  }
  return { ...counts, exact };
}
