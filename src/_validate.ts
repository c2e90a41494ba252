// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Option checks: each takes a name and a value, and returns the value or
 * throws naming both. @module
 */

/**
 * A positive safe integer, else a `RangeError`; `unit` (such as
 * `"milliseconds"`) is named in the message.
 */
export function positiveInteger(
  name: string,
  value: unknown,
  unit?: string,
): number {
  if (!Number.isSafeInteger(value) || (value as number) <= 0) {
    throw new RangeError(
      `'${name}' must be a positive integer${of(unit)}: current value is ${
        shown(value)
      }`,
    );
  }
  return value as number;
}

/** A non-negative safe integer, else a `RangeError` naming `unit`. */
export function nonNegativeInteger(
  name: string,
  value: unknown,
  unit?: string,
): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw new RangeError(
      `'${name}' must be a non-negative integer${of(unit)}: current value is ${
        shown(value)
      }`,
    );
  }
  return value as number;
}

/** A duration: a positive integer of milliseconds, else a `RangeError`. */
export function positiveMs(name: string, value: unknown): number {
  return positiveInteger(name, value, "milliseconds");
}

/** A duration: a non-negative integer of milliseconds, else a `RangeError`. */
export function nonNegativeMs(name: string, value: unknown): number {
  return nonNegativeInteger(name, value, "milliseconds");
}

const of = (unit: string | undefined) =>
  unit === undefined ? "" : ` of ${unit}`;

/** A value as a message shows it: a string quoted (`"24h"`, not `24h`). */
function shown(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

/**
 * Throws a `TypeError` for the first own string key of `options` not in
 * `known`, naming the nearest known name; symbol keys (test hooks) pass.
 * `what` names the options' owner: `"idempotency()"`, `"RedisStore"`.
 */
export function knownOptions(
  what: string,
  options: object,
  known: readonly string[],
): void {
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const near = nearest(name, known);
    const hint = near === undefined
      ? `its options are ${known.map((k) => `'${k}'`).join(", ")}`
      : `did you mean '${near}'?`;
    throw new TypeError(`${what} has no option '${name}': ${hint}`);
  }
}

/** Throws a `TypeError` when `name` is given but `needs` is not: it would do nothing. */
export function needsOption(
  name: string,
  given: boolean,
  needs: string,
  present: boolean,
): void {
  if (given && !present) {
    throw new TypeError(
      `'${name}' has no effect without ${needs}: set that too, or drop '${name}'`,
    );
  }
}

/**
 * The name of `known` nearest to `name` (case-insensitive edit distance, a
 * prefix counting as near), if it is near enough to be a misspelling.
 */
export function nearest(
  name: string,
  known: readonly string[],
): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const other = candidate.toLowerCase();
    const d = lower.startsWith(other) || other.startsWith(lower)
      ? Math.min(1, Math.abs(lower.length - other.length))
      : distance(lower, other);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return bestDistance <= Math.max(2, Math.ceil(name.length * 0.4))
    ? best
    : undefined;
}

/** Levenshtein distance: insertions, deletions and substitutions. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      const swap = row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      next.push(Math.min(swap, row[j]! + 1, next[j - 1]! + 1));
    }
    row = next;
  }
  return row[b.length]!;
}

/** A boolean, `false` when absent, else a `TypeError`. */
export function optionalBoolean(name: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") {
    throw new TypeError(
      `'${name}' must be a boolean: current value is ${value}`,
    );
  }
  return value;
}

/** A function or `undefined`, else a `TypeError`. */
export function optionalFunction<F>(
  name: string,
  value: F | undefined,
): F | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "function") {
    throw new TypeError(
      `'${name}' must be a function: current value is ${value}`,
    );
  }
  return value;
}

/** RFC 9110 `token`, one character at least: what a header name may be. */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A header name ({@linkcode TOKEN}), lower-cased, else a `TypeError`. */
export function headerName(name: string, value: unknown): string {
  if (typeof value !== "string" || !TOKEN.test(value)) {
    throw new TypeError(
      `'${name}' must be a header name: current value is ${
        JSON.stringify(value)
      }`,
    );
  }
  return value.toLowerCase();
}

/** A list of header names, as a set of them lower-cased, else a `TypeError`. */
export function headerNames(name: string, value: unknown): ReadonlySet<string> {
  if (!Array.isArray(value)) {
    throw new TypeError(
      `'${name}' must be a list of header names: current value is ${
        JSON.stringify(value)
      }`,
    );
  }
  return new Set(value.map((item) => headerName(name, item)));
}

/** Throws `TypeError(missing)` unless `target[name]` is a function. */
export function assertMethod(
  target: unknown,
  name: string,
  missing: string,
): void {
  const found = (target as Record<string, unknown> | null | undefined)?.[name];
  if (typeof found !== "function") throw new TypeError(missing);
}

/** Throws a `TypeError` unless `store` (option `name`) has an `IdempotencyStore`'s four methods. */
export function assertStore(name: string, store: unknown): void {
  for (const method of ["claim", "complete", "release", "extend"]) {
    assertMethod(
      store,
      method,
      `'${name}' must implement IdempotencyStore: it has no ${method}() method`,
    );
  }
}

/** An error's message, else its text: the one error-to-text the others build on. */
export function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : String(error);
}

/** Whether `method` is a method name the middleware and the client take: letters only. */
export function isMethodName(method: unknown): method is string {
  return typeof method === "string" && /^[A-Za-z]+$/.test(method);
}
