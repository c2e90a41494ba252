// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Option checks: each takes a name and a value, and returns the value or
 * throws naming both. @module
 */

/** A positive safe integer, else a `RangeError`. */
export function positiveInteger(name: string, value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) <= 0) {
    throw new RangeError(
      `'${name}' must be a positive integer: current value is ${value}`,
    );
  }
  return value as number;
}

/** A non-negative safe integer, else a `RangeError`. */
export function nonNegativeInteger(name: string, value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw new RangeError(
      `'${name}' must be a non-negative integer: current value is ${value}`,
    );
  }
  return value as number;
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
