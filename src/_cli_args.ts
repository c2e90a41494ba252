// Copyright 2026 the @idempotent/http authors. MIT license.
/** The command line of `@idempotent/http/cli`, parsed and checked. @module */

import { hasherOf } from "./fingerprint.ts";
import type { KeyLocation } from "./inspect.ts";
import { parseIdempotencyKey } from "./key.ts";
import { assertSlot } from "./store.ts";

/** What the command line asks for. */
export type Command = "inspect" | "forget" | "stats";

/** Which store, and where. */
export type Target =
  | { kind: "redis"; url: string; prefix: string | undefined }
  | { kind: "postgres"; url: string; table: string | undefined }
  | { kind: "kv"; path: string; prefix: Deno.KvKey | undefined };

/** A checked command line. */
export interface Parsed {
  command: Command;
  target: Target;
  /** The record (inspect, forget): a slot, or a key the library hashes. */
  record: { slot: string } | { location: KeyLocation } | null;
  /** What names the record, for the human output. */
  label: string;
  json: boolean;
  yes: boolean;
  limit: number | undefined;
}

/** A command line that cannot run: exit code 2, nothing read or changed. */
export class UsageError extends Error {
  /** Makes a usage error. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

const FLAGS = new Set(["json", "yes", "help"]);
const VALUES = new Set([
  "redis",
  "postgres",
  "kv",
  "prefix",
  "table",
  "scope",
  "key",
  "secret-env",
  "slot",
  "limit",
]);

/** Every option's name, for the help's test. */
export const OPTION_NAMES: readonly string[] = [...FLAGS, ...VALUES];

/** Splits `args` into the command and its options; `null` asks for help. */
function split(
  args: string[],
): { command: string | undefined; options: Map<string, string | true> } | null {
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
    if (FLAGS.has(name)) {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      options.set(name, true);
    } else if (VALUES.has(name)) {
      const value = eq >= 0 ? arg.slice(eq + 1) : args[++i];
      if (value === undefined || (eq < 0 && value.startsWith("--"))) {
        throw new UsageError(`--${name} needs a value`);
      }
      options.set(name, value);
    } else {
      throw new UsageError(`unknown option ${JSON.stringify(arg)}`);
    }
  }
  return { command, options };
}

/**
 * Parses a command line; `env` reads the variable `--secret-env` names.
 * Returns `null` for `--help`.
 * @throws {UsageError} When the command line cannot run.
 */
export function parseArgs(
  args: string[],
  env: (name: string) => string | undefined,
): Parsed | null {
  const parts = split(args);
  if (parts === null) return null;
  const { command, options } = parts;
  const text = (name: string) => options.get(name) as string | undefined;
  if (command !== "inspect" && command !== "forget" && command !== "stats") {
    throw new UsageError(
      command === undefined
        ? "name a command: inspect, forget or stats"
        : `unknown command ${
          JSON.stringify(command)
        }: inspect, forget or stats`,
    );
  }
  const target = targetOf(text);
  const only = (name: string, allowed: boolean, why: string) => {
    if (options.has(name) && !allowed) {
      throw new UsageError(`--${name} ${why}`);
    }
  };
  only("yes", command === "forget", "is for forget only");
  only("limit", command === "stats", "is for stats only");
  let record: Parsed["record"] = null;
  let label = "";
  if (command === "stats") {
    for (const name of ["scope", "key", "secret-env", "slot"]) {
      only(name, false, "is for inspect and forget: stats counts every key");
    }
  } else {
    ({ record, label } = recordFrom(options, env));
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
  return {
    command,
    target,
    record,
    label,
    json: options.has("json"),
    yes: options.has("yes"),
    limit: limit === undefined ? undefined : Number(limit),
  };
}

function targetOf(text: (name: string) => string | undefined): Target {
  const given = ["redis", "postgres", "kv"].filter((n) =>
    text(n) !== undefined
  );
  if (given.length !== 1) {
    throw new UsageError(
      given.length === 0
        ? "name the store: --redis URL, --postgres URL or --kv PATH"
        : `name one store: ${given.map((n) => `--${n}`).join(" and ")} given`,
    );
  }
  const prefix = text("prefix");
  const table = text("table");
  if (table !== undefined && given[0] !== "postgres") {
    throw new UsageError("--table is for --postgres only");
  }
  if (prefix !== undefined && given[0] === "postgres") {
    throw new UsageError(
      "--prefix is for --redis and --kv: PostgreSQL takes --table",
    );
  }
  if (given[0] === "redis") {
    return { kind: "redis", url: text("redis")!, prefix };
  }
  if (given[0] === "postgres") {
    return { kind: "postgres", url: text("postgres")!, table };
  }
  return {
    kind: "kv",
    path: text("kv")!,
    prefix: prefix === undefined ? undefined : kvPrefix(prefix),
  };
}

/** A KV prefix: a JSON array of key parts, or one string part. */
function kvPrefix(text: string): Deno.KvKey {
  if (!text.startsWith("[")) return [text];
  let parts: unknown;
  try {
    parts = JSON.parse(text);
  } catch {
    parts = null;
  }
  if (
    !Array.isArray(parts) ||
    !parts.every((p) => ["string", "number", "boolean"].includes(typeof p))
  ) {
    throw new UsageError(
      `--prefix for --kv must be a JSON array of strings, numbers or booleans, or one string: current value is ${text}`,
    );
  }
  return parts as Deno.KvKey;
}

function recordFrom(
  options: Map<string, string | true>,
  env: (name: string) => string | undefined,
): { record: NonNullable<Parsed["record"]>; label: string } {
  const text = (name: string) => options.get(name) as string | undefined;
  const slot = text("slot");
  const key = text("key");
  const scope = text("scope");
  if (slot !== undefined) {
    if (key !== undefined || scope !== undefined) {
      throw new UsageError("give --slot, or --scope with --key");
    }
    if (options.has("secret-env")) {
      throw new UsageError("--secret-env hashes a --key: a --slot is hashed");
    }
    try {
      assertSlot(slot);
    } catch (error) {
      throw new UsageError(`--slot: ${(error as Error).message}`);
    }
    return { record: { slot }, label: `slot ${slot}` };
  }
  if (key === undefined || scope === undefined || scope === "") {
    throw new UsageError(
      "name the record: --scope S --key K (S as your scope function returned it, or global), or --slot SLOT",
    );
  }
  const parsed = parseIdempotencyKey(key);
  if (!parsed.ok) {
    throw new UsageError(
      `--key is not a key the middleware accepts: ${parsed.reason}`,
    );
  }
  const variable = text("secret-env");
  const secret = variable === undefined ? undefined : env(variable);
  if (variable !== undefined && !secret) {
    throw new UsageError(
      `--secret-env ${variable}: the environment variable ${variable} is not set`,
    );
  }
  try {
    hasherOf(secret); // the library's checks of the secret, before connecting
  } catch (error) {
    throw new UsageError(
      `--secret-env ${variable}: ${(error as Error).message}`,
    );
  }
  return {
    record: {
      location: secret === undefined ? { scope, key } : { scope, key, secret },
    },
    label: `key ${JSON.stringify(key)} in scope ${JSON.stringify(scope)}`,
  };
}
