// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The command line of `@idempotent/http/cli`, parsed (`node:util`'s
 * `parseArgs` splits it) and checked: the record's location by
 * `locateSlot`, the rule `inspectKey` and `forgetKey` apply, before any store
 * is reached.
 * @module
 */

import { parseArgs as split } from "node:util";
import { type KeyLocation, locateSlot } from "../inspect.ts";

/** A Redis target: `nodes`, a cluster's seed URLs (`--redis-cluster`). */
export type RedisTarget = {
  kind: "redis";
  url: string;
  options: { prefix?: string };
  nodes?: string[];
};
/** A PostgreSQL target. */
export type PostgresTarget = {
  kind: "postgres";
  url: string;
  options: { table?: string };
};
/** A MySQL/MariaDB target. */
export type MysqlTarget = {
  kind: "mysql";
  url: string;
  options: { table?: string };
};

/** A DynamoDB target: `url` is the table's name. */
export type DynamoDbTarget = {
  kind: "dynamodb";
  url: string;
  options: { endpoint?: string; region?: string };
};

/** One store: where, and its options as the app gives them. */
export type OneTarget =
  | DynamoDbTarget
  | RedisTarget
  | PostgresTarget
  | MysqlTarget
  | { kind: "kv"; url: string; options: { prefix?: Deno.KvKey } } // a path or URL
  | { kind: "sqlite"; url: string; options: { table?: string } }; // a path

/** A checked command line. */
export interface Parsed {
  command: "inspect" | "forget" | "stats";
  /** One store, or a FailoverStore's two: Redis primary, PostgreSQL fallback. */
  targets: [OneTarget] | [RedisTarget, PostgresTarget];
  /** The record of inspect and forget, as given (`slot`: where it is). */
  location: (KeyLocation | { slot: string }) | null;
  /** The slot `location` names, checked. */
  slot: string;
  json: boolean;
  limit: number | undefined;
  /** The `importEncryptionKeys` text `--encryption-keys-env` names. */
  encryptionKeys?: string;
}

/** A command line that cannot run: exit code 2, nothing read or changed. */
export class UsageError extends Error {
  override name = "UsageError";
}

const STORES = [
  ..."redis redis-cluster postgres mysql kv sqlite dynamodb".split(" "),
];
const FLAGS = ["json", "yes", "help", "global"];
const VALUES = [
  ...STORES,
  ..."prefix table endpoint region scope key secret-env slot limit encryption-keys-env"
    .split(" "),
];
const OPTIONS = Object.fromEntries([
  ...FLAGS.map((name) => [name, { type: "boolean" as const }]),
  ...VALUES.map((name) => [name, { type: "string" as const }]),
]);
OPTIONS.help = { type: "boolean", short: "h" };

/**
 * Parses a command line; `env` reads the variables `--secret-env` and
 * `--encryption-keys-env` name. Returns `null` for `--help`.
 * @throws {UsageError} When the command line cannot run.
 */
export function parseArgs(
  args: string[],
  env: (name: string) => string | undefined,
): Parsed | null {
  const options = new Map<string, string | true>();
  let command: string | undefined;
  const { tokens } = split({
    args,
    options: OPTIONS,
    strict: false,
    tokens: true,
  });
  for (const token of tokens) {
    if (token.kind === "option-terminator") {
      throw new UsageError('unknown option "--"');
    }
    if (token.kind === "positional") {
      if (token.value === "help") return null;
      if (command !== undefined) {
        throw new UsageError(
          `unexpected argument ${JSON.stringify(token.value)}`,
        );
      }
      command = token.value;
      continue;
    }
    const { name, value, inlineValue } = token;
    if (name === "help") return null;
    if (!(name in OPTIONS)) {
      throw new UsageError(
        `unknown option ${JSON.stringify(args[token.index])}`,
      );
    }
    if (options.has(name)) throw new UsageError(`--${name} is given twice`);
    if (FLAGS.includes(name)) {
      if (value !== undefined) throw new UsageError(`--${name} takes no value`);
      options.set(name, true);
    } else if (
      value === undefined || (!inlineValue && value.startsWith("--"))
    ) {
      throw new UsageError(`--${name} needs a value`);
    } else {
      options.set(name, value);
    }
  }
  const text = (name: string) => options.get(name) as string | undefined;
  if (command !== "inspect" && command !== "forget" && command !== "stats") {
    const named = command === undefined
      ? "name a command"
      : `unknown command ${JSON.stringify(command)}`;
    throw new UsageError(`${named}: inspect, forget or stats`);
  }
  const only = (name: string, allowed: boolean, why: string) => {
    if (options.has(name) && !allowed) throw new UsageError(`--${name} ${why}`);
  };
  only("yes", command === "forget", "is for forget only");
  only("limit", command === "stats", "is for stats only");
  for (const name of ["scope", "global", "key", "secret-env", "slot"]) {
    only(
      name,
      command !== "stats",
      "is for inspect and forget: stats counts every key",
    );
  }
  const targets = targetsOf(text);
  const located = command === "stats"
    ? { location: null, slot: "" }
    : locationOf(text, options.has("global"), env);
  if (command === "forget" && !options.has("yes")) {
    throw new UsageError(
      "forget deletes the record: add --yes (inspect it first)",
    );
  }
  const limit = text("limit");
  if (limit !== undefined && !/^[1-9][0-9]{0,8}$/.test(limit)) {
    throw new UsageError(
      `--limit must be a positive integer: current value is ${limit}`,
    );
  }
  const keys = text("encryption-keys-env");
  const encryptionKeys = keys === undefined
    ? undefined
    : variable(keys, env, "--encryption-keys-env");
  return {
    command,
    targets,
    ...located,
    json: options.has("json"),
    limit: limit === undefined ? undefined : Number(limit),
    ...(encryptionKeys === undefined ? {} : { encryptionKeys }),
  };
}

/** The variable `name`'s value; unset or empty is a usage error. */
function variable(
  name: string,
  env: (name: string) => string | undefined,
  option: string,
): string {
  const value = env(name);
  if (!value) {
    throw new UsageError(
      `${option} ${name}: the environment variable ${name} is not set`,
    );
  }
  return value;
}

function targetsOf(
  text: (name: string) => string | undefined,
): Parsed["targets"] {
  const given = STORES.filter((n) => text(n) !== undefined);
  const redis = given.find((n) => n.startsWith("redis"));
  if (given.length === 2 && redis && given.includes("postgres")) {
    // The two stores of a FailoverStore: each takes its own options.
    const primary = targetOf(redis, (n) => n === "table" ? undefined : text(n));
    const fallback = targetOf(
      "postgres",
      (n) => n === "prefix" ? undefined : text(n),
    );
    return [primary as RedisTarget, fallback as PostgresTarget];
  }
  if (given.length !== 1) {
    throw new UsageError(
      given.length === 0
        ? "name the store: --redis URL, --redis-cluster URL[,URL...], --postgres URL, --mysql URL, --kv PATH, --sqlite PATH or --dynamodb TABLE"
        : `name one store, or --redis with --postgres (a FailoverStore): ${
          given.map((n) => `--${n}`).join(" and ")
        } given`,
    );
  }
  return [targetOf(given[0]!, text)];
}

const SQL = { postgres: "PostgreSQL", mysql: "MySQL", sqlite: "SQLite" };
const URL_SCHEMES: Record<string, RegExp> = {
  redis: /^rediss?:$/,
  postgres: /^postgres(ql)?:$/,
  mysql: /^mysql:$/,
};
const EXAMPLE_URLS: Record<string, string> = {
  redis: "redis://HOST:PORT",
  postgres: "postgres://USER@HOST:PORT/DB",
  mysql: "mysql://USER:PASS@HOST:PORT/DB",
};

function targetOf(
  option: string,
  text: (name: string) => string | undefined,
): OneTarget {
  const url = text(option)!;
  const scheme = URL_SCHEMES[option];
  if (scheme && !scheme.test(URL.parse(url)?.protocol ?? "")) {
    throw new UsageError(
      `--${option} takes a URL (${EXAMPLE_URLS[option]}): current value is ${
        url.replace(/\/\/[^@/]*@/, "//…@")
      }`,
    );
  }
  const prefix = text("prefix");
  const table = text("table");
  const aws = { endpoint: text("endpoint"), region: text("region") };
  if (option !== "dynamodb" && (aws.endpoint ?? aws.region) !== undefined) {
    throw new UsageError("--endpoint and --region are for --dynamodb only");
  }
  if (option === "dynamodb") {
    if (prefix !== undefined || table !== undefined) {
      throw new UsageError(
        "--dynamodb TABLE names the table: no --prefix or --table",
      );
    }
    if (
      aws.endpoint !== undefined &&
      !/^https?:$/.test(URL.parse(aws.endpoint)?.protocol ?? "")
    ) {
      throw new UsageError(
        `--endpoint takes a URL (http://HOST:PORT): current value is ${aws.endpoint}`,
      );
    }
    const options = Object.fromEntries(
      Object.entries(aws).filter(([, v]) => v !== undefined),
    );
    return { kind: "dynamodb", url, options };
  }
  if (option in SQL) {
    const kind = option as keyof typeof SQL;
    if (prefix !== undefined) {
      throw new UsageError(
        `--prefix is for --redis and --kv: ${SQL[kind]} takes --table`,
      );
    }
    return { kind, url, options: table === undefined ? {} : { table } };
  }
  if (table !== undefined) {
    throw new UsageError(
      "--table is for --postgres, --mysql and --sqlite only",
    );
  }
  if (option === "kv") {
    return {
      kind: "kv",
      url,
      options: prefix === undefined ? {} : { prefix: kvPrefix(prefix) },
    };
  }
  const options = prefix === undefined ? {} : { prefix };
  if (option === "redis") return { kind: "redis", url, options };
  const nodes = url.split(",").map((u) => u.trim());
  const bad = nodes.find((u) => !/^rediss?:\/\/[^/?#\s]+/.test(u));
  if (bad !== undefined) {
    throw new UsageError(
      `--redis-cluster takes the URLs of cluster nodes, comma-separated (redis://HOST:PORT,...): current value is ${
        nodes.find((u) => !/^rediss?:\/\//.test(u)) ?? url
      }`,
    );
  }
  return { kind: "redis", url: nodes[0]!, options, nodes };
}

/** A KV prefix: a JSON array of key parts, or one string part. */
function kvPrefix(text: string): Deno.KvKey {
  if (!text.startsWith("[")) return [text];
  try {
    const parts: unknown[] = JSON.parse(text); // an array: it starts with [
    const part = (p: unknown) =>
      ["string", "number", "boolean"].includes(typeof p);
    if (parts.every(part)) return parts as Deno.KvKey;
  } catch { /* not JSON: refused below */ }
  throw new UsageError(
    `--prefix for --kv must be a JSON array of strings, numbers or booleans, or one string: current value is ${text}`,
  );
}

/** The record's location and slot, checked by `locateSlot`. */
function locationOf(
  text: (name: string) => string | undefined,
  global: boolean,
  env: (name: string) => string | undefined,
): Pick<Parsed, "location" | "slot"> {
  const [slot, key, scope, secretVariable] = [
    "slot",
    "key",
    "scope",
    "secret-env",
  ].map(text);
  if (global && scope !== undefined) {
    throw new UsageError(
      `give --global (the scope: "global" option) or --scope S (the text the scope function returned), not both`,
    );
  }
  if (
    slot !== undefined && (key !== undefined || scope !== undefined || global)
  ) {
    throw new UsageError(
      "give --slot, or --scope with --key (or --global with --key)",
    );
  }
  if (slot !== undefined && secretVariable !== undefined) {
    throw new UsageError("--secret-env hashes a --key: a --slot is hashed");
  }
  if (slot === undefined && (key === undefined || !(scope || global))) {
    throw new UsageError(
      `name the record: --scope S --key K (S as your scope function returned it), --global --key K (the scope: "global" option), or --slot SLOT`,
    );
  }
  let location: NonNullable<Parsed["location"]>;
  if (slot !== undefined) location = { slot };
  else {
    const where = global ? { global: true as const } : { scope: scope! };
    location = { ...where, key: key! };
    if (secretVariable !== undefined) {
      try {
        location.secret = secretOf(
          variable(secretVariable, env, "--secret-env"),
        );
      } catch (error) {
        if (error instanceof UsageError) throw error;
        throw new UsageError(
          `--secret-env ${secretVariable}: ${(error as Error).message}`,
        );
      }
    }
  }
  try {
    return { location, slot: locateSlot(location) };
  } catch (error) {
    // locateSlot names the field ('key' …): the command line names the option.
    const message = (error as Error).message;
    const field = /^'(key|scope|slot)' /.exec(message)?.[1];
    throw new UsageError(
      field !== undefined
        ? `--${field} ${message.slice(field.length + 3)}`
        : `--secret-env ${secretVariable}: ${message}`,
    );
  }
}

/**
 * The secret a `--secret-env` variable holds: `hex:…` and `base64:…` (standard
 * or URL-safe) are bytes, as an app's `Uint8Array` secret; any other value is
 * text, hashed as UTF-8 as an app's string secret is.
 */
export function secretOf(value: string): string | Uint8Array {
  const [, encoding, data = ""] = /^(hex|base64):(.*)$/s.exec(value) ?? [];
  if (encoding === undefined) return value;
  if (encoding === "hex") {
    const bad = /[^0-9a-fA-F]/.exec(data)?.index; // not the character: a secret's
    if (bad !== undefined || data.length % 2 === 1) {
      throw new Error(
        `the value after hex: must be hex digits (0-9, a-f), two a byte: ${
          bad === undefined
            ? `${data.length} digits, an odd count`
            : `character ${bad + 1} is not one`
        }`,
      );
    }
    return Uint8Array.fromHex(data);
  }
  try {
    return Uint8Array.fromBase64(data.replace(/-/g, "+").replace(/_/g, "/"));
  } catch (error) {
    throw new Error(
      `the value after base64: is not standard or URL-safe base64: ${
        (error as Error).message
      }`,
    );
  }
}
