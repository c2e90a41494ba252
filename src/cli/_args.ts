// Copyright 2026 the @idempotent/http authors. MIT license.
/** The command line of `@idempotent/http/cli`, parsed and checked. @module */

import { hasherOf } from "../fingerprint.ts";
import type { KeyLocation } from "../inspect.ts";
import { parseIdempotencyKey } from "../key.ts";
import { assertSlot } from "../store.ts";

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

type OneKind = "redis" | "postgres" | "mysql" | "kv" | "sqlite";

/** Which store, where, and its options as the app gives them. */
export type Target =
  | RedisTarget
  | PostgresTarget
  | MysqlTarget
  | { kind: "kv"; url: string; options: { prefix?: Deno.KvKey } } // a path or URL
  | { kind: "sqlite"; url: string; options: { table?: string } } // a path
  // A FailoverStore's two (docs/architecture.md, Inspect and forget).
  | { kind: "failover"; primary: RedisTarget; fallback: PostgresTarget };

/** A checked command line. */
export interface Parsed {
  command: "inspect" | "forget" | "stats";
  target: Target;
  /** The record of inspect and forget, as `inspectKey` takes it. */
  record: KeyLocation | { slot: string } | null;
  /** What names the record, for the human output. */
  label: string;
  json: boolean;
  limit: number | undefined;
  /** The `importEncryptionKeys` text `--encryption-keys-env` names. */
  encryptionKeys?: string;
}

/** A command line that cannot run: exit code 2, nothing read or changed. */
export class UsageError extends Error {
  override name = "UsageError";
}

const FLAGS = ["json", "yes", "help", "global"];
const VALUES =
  "redis redis-cluster postgres mysql kv sqlite prefix table scope key secret-env slot limit encryption-keys-env"
    .split(" ");

/** Every option's name, for the help's test. */
export const OPTION_NAMES: readonly string[] = [...FLAGS, ...VALUES];

/**
 * Parses a command line; `env` reads the variable `--secret-env` names.
 * Returns `null` for `--help`.
 * @throws {UsageError} When the command line cannot run.
 */
export function parseArgs(
  args: string[],
  env: (name: string) => string | undefined,
): Parsed | null {
  const options = new Map<string, string | true>();
  let command: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "-h" || arg === "--help" || arg === "help") return null;
    if (!arg.startsWith("--")) {
      if (command !== undefined) {
        throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
      }
      command = arg;
      continue;
    }
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    if (options.has(name)) throw new UsageError(`--${name} is given twice`);
    if (FLAGS.includes(name)) {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      options.set(name, true);
    } else if (VALUES.includes(name)) {
      const value = eq >= 0 ? arg.slice(eq + 1) : args[++i];
      if (value === undefined || (eq < 0 && value.startsWith("--"))) {
        throw new UsageError(`--${name} needs a value`);
      }
      options.set(name, value);
    } else {
      throw new UsageError(`unknown option ${JSON.stringify(arg)}`);
    }
  }
  const text = (name: string) => options.get(name) as string | undefined;
  if (command !== "inspect" && command !== "forget" && command !== "stats") {
    const named = command === undefined
      ? "name a command"
      : `unknown command ${JSON.stringify(command)}`;
    throw new UsageError(`${named}: inspect, forget or stats`);
  }
  const target = targetOf(text);
  const only = (name: string, allowed: boolean, why: string) => {
    if (options.has(name) && !allowed) throw new UsageError(`--${name} ${why}`);
  };
  only("yes", command === "forget", "is for forget only");
  only("limit", command === "stats", "is for stats only");
  let found = { record: null as Parsed["record"], label: "" };
  if (command === "stats") {
    for (const name of ["scope", "global", "key", "secret-env", "slot"]) {
      only(name, false, "is for inspect and forget: stats counts every key");
    }
  } else {
    found = recordFrom(text, options.has("global"), env);
    if (command === "forget" && !options.has("yes")) {
      throw new UsageError(
        "forget deletes the record: add --yes (inspect it first)",
      );
    }
  }
  const limit = text("limit");
  if (limit !== undefined && !/^[1-9][0-9]{0,8}$/.test(limit)) {
    throw new UsageError(
      `--limit must be a positive integer: current value is ${limit}`,
    );
  }
  const keysVariable = text("encryption-keys-env");
  const encryptionKeys = keysVariable === undefined
    ? undefined
    : env(keysVariable);
  if (keysVariable !== undefined && !encryptionKeys) {
    throw new UsageError(
      `--encryption-keys-env ${keysVariable}: the environment variable ${keysVariable} is not set`,
    );
  }
  return {
    command,
    target,
    ...found,
    json: options.has("json"),
    limit: limit === undefined ? undefined : Number(limit),
    ...(encryptionKeys === undefined ? {} : { encryptionKeys }),
  };
}

function targetOf(text: (name: string) => string | undefined): Target {
  const given = ["redis", "redis-cluster", "postgres", "mysql", "kv", "sqlite"]
    .filter((
      n,
    ) => text(n) !== undefined);
  const redis = given.find((n) => n.startsWith("redis"));
  if (given.length === 2 && redis && given.includes("postgres")) {
    // The two stores of a FailoverStore: Redis primary, PostgreSQL fallback.
    const primary = targetOf((n) =>
      n === "table" || n === "postgres" ? undefined : text(n)
    );
    const fallback = targetOf((n) =>
      n === "prefix" || n.startsWith("redis") ? undefined : text(n)
    );
    return {
      kind: "failover",
      primary: primary as RedisTarget,
      fallback: fallback as PostgresTarget,
    };
  }
  if (given.length !== 1) {
    throw new UsageError(
      given.length === 0
        ? "name the store: --redis URL, --redis-cluster URL[,URL...], --postgres URL, --mysql URL, --kv PATH or --sqlite PATH"
        : `name one store, or --redis with --postgres (a FailoverStore): ${
          given.map((n) => `--${n}`).join(" and ")
        } given`,
    );
  }
  const kind = (redis ? "redis" : given[0]) as OneKind;
  const url = text(given[0]!)!;
  const prefix = text("prefix");
  const table = text("table");
  if (table !== undefined && !["postgres", "mysql", "sqlite"].includes(kind)) {
    throw new UsageError(
      "--table is for --postgres, --mysql and --sqlite only",
    );
  }
  if (redis === "redis-cluster") {
    const nodes = url.split(",").map((u) => u.trim());
    if (nodes.some((u) => !/^rediss?:\/\/[^/?#\s]+/.test(u))) {
      throw new UsageError(
        `--redis-cluster takes the URLs of cluster nodes, comma-separated (redis://HOST:PORT,...): current value is ${
          nodes.find((u) => !/^rediss?:\/\//.test(u)) ?? url
        }`,
      );
    }
    const options = prefix === undefined ? {} : { prefix };
    return { kind: "redis", url: nodes[0]!, options, nodes };
  }
  if (kind === "postgres" || kind === "mysql" || kind === "sqlite") {
    if (prefix !== undefined) {
      throw new UsageError(
        `--prefix is for --redis and --kv: ${
          { postgres: "PostgreSQL", mysql: "MySQL", sqlite: "SQLite" }[kind]
        } takes --table`,
      );
    }
    return { kind, url, options: table === undefined ? {} : { table } };
  }
  if (prefix === undefined) return { kind, url, options: {} };
  return kind === "redis"
    ? { kind, url, options: { prefix } }
    : { kind, url, options: { prefix: kvPrefix(prefix) } };
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

function recordFrom(
  text: (name: string) => string | undefined,
  global: boolean,
  env: (name: string) => string | undefined,
): { record: NonNullable<Parsed["record"]>; label: string } {
  const slot = text("slot");
  const key = text("key");
  const scope = text("scope");
  const variable = text("secret-env");
  if (global && scope !== undefined) {
    throw new UsageError(
      `give --global (the scope: "global" option) or --scope S (the text the scope function returned), not both`,
    );
  }
  if (slot !== undefined) {
    if (key !== undefined || scope !== undefined || global) {
      throw new UsageError(
        "give --slot, or --scope with --key (or --global with --key)",
      );
    }
    if (variable !== undefined) {
      throw new UsageError("--secret-env hashes a --key: a --slot is hashed");
    }
    try {
      assertSlot(slot);
    } catch (error) {
      throw new UsageError(`--slot: ${(error as Error).message}`);
    }
    return { record: { slot }, label: `slot ${slot}` };
  }
  if (key === undefined || !(scope || global)) {
    throw new UsageError(
      `name the record: --scope S --key K (S as your scope function returned it), --global --key K (the scope: "global" option), or --slot SLOT`,
    );
  }
  const parsed = parseIdempotencyKey(key);
  if (!parsed.ok) {
    throw new UsageError(
      `--key is not a key the middleware accepts: ${parsed.reason}`,
    );
  }
  let secret: string | Uint8Array | undefined;
  try {
    const value = variable === undefined ? undefined : env(variable);
    if (variable !== undefined && !value) {
      throw new Error(`the environment variable ${variable} is not set`);
    }
    secret = value === undefined ? undefined : secretOf(value);
    hasherOf(secret); // the library's checks of the secret, before connecting
  } catch (error) {
    throw new UsageError(
      `--secret-env ${variable}: ${(error as Error).message}`,
    );
  }
  const where = global ? { global: true as const } : { scope: scope! };
  return {
    record: secret === undefined
      ? { ...where, key }
      : { ...where, key, secret },
    label: `key ${JSON.stringify(key)} ${
      global
        ? 'in the global scope (scope: "global")'
        : `in scope ${JSON.stringify(scope)}`
    }`,
  };
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
