// Copyright 2026 the @idempotent/http authors. MIT license.
/** The command line of `@idempotent/http/cli`, parsed and checked. @module */

import { hasherOf } from "./fingerprint.ts";
import type { KeyLocation } from "./inspect.ts";
import { parseIdempotencyKey } from "./key.ts";
import { assertSlot } from "./store.ts";

/** Which store, where, and its options as the app gives them. */
export type Target =
  | { kind: "redis"; url: string; options: { prefix?: string } }
  | { kind: "postgres"; url: string; options: { table?: string } }
  | { kind: "kv"; url: string; options: { prefix?: Deno.KvKey } }; // a path or URL

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

const FLAGS = ["json", "yes", "help"];
const VALUES =
  "redis postgres kv prefix table scope key secret-env slot limit encryption-keys-env"
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
    for (const name of ["scope", "key", "secret-env", "slot"]) {
      only(name, false, "is for inspect and forget: stats counts every key");
    }
  } else {
    found = recordFrom(text, env);
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
  const kind = given[0] as Target["kind"];
  const url = text(kind)!;
  const prefix = text("prefix");
  const table = text("table");
  if (table !== undefined && kind !== "postgres") {
    throw new UsageError("--table is for --postgres only");
  }
  if (kind === "postgres") {
    if (prefix !== undefined) {
      throw new UsageError(
        "--prefix is for --redis and --kv: PostgreSQL takes --table",
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
  env: (name: string) => string | undefined,
): { record: NonNullable<Parsed["record"]>; label: string } {
  const slot = text("slot");
  const key = text("key");
  const scope = text("scope");
  const variable = text("secret-env");
  if (slot !== undefined) {
    if (key !== undefined || scope !== undefined) {
      throw new UsageError("give --slot, or --scope with --key");
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
  if (key === undefined || !scope) {
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
  const secret = variable === undefined ? undefined : env(variable);
  try {
    if (variable !== undefined && !secret) {
      throw new Error(`the environment variable ${variable} is not set`);
    }
    hasherOf(secret); // the library's checks of the secret, before connecting
  } catch (error) {
    throw new UsageError(
      `--secret-env ${variable}: ${(error as Error).message}`,
    );
  }
  return {
    record: secret === undefined ? { scope, key } : { scope, key, secret },
    label: `key ${JSON.stringify(key)} in scope ${JSON.stringify(scope)}`,
  };
}
