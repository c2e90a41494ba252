// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Option checks shared by the middleware and the stores, with messages that
 * name the option and its value.
 *
 * @module
 */

/**
 * Returns `value` if it is a positive safe integer, else throws.
 *
 * @param name The option's name, for the message.
 * @param value The value to check.
 * @returns The value.
 * @throws {RangeError} When it is not a positive safe integer.
 */
export function positiveInteger(name: string, value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) <= 0) {
    throw new RangeError(
      `'${name}' must be a positive integer: current value is ${value}`,
    );
  }
  return value as number;
}

/**
 * Returns `value` if it is a non-negative safe integer, else throws.
 *
 * @param name The option's name, for the message.
 * @param value The value to check.
 * @returns The value.
 * @throws {RangeError} When it is not a non-negative safe integer.
 */
export function nonNegativeInteger(name: string, value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw new RangeError(
      `'${name}' must be a non-negative integer: current value is ${value}`,
    );
  }
  return value as number;
}

/**
 * Returns `value` if it is a boolean, `false` if it is absent, else throws.
 *
 * @param name The option's name, for the message.
 * @param value The value to check.
 * @returns The value, or `false`.
 * @throws {TypeError} When it is neither absent nor a boolean.
 */
export function optionalBoolean(name: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") {
    throw new TypeError(
      `'${name}' must be a boolean: current value is ${value}`,
    );
  }
  return value;
}

/**
 * Returns `value` if it is a function or absent, else throws.
 *
 * @typeParam F The function's type.
 * @param name The option's name, for the message.
 * @param value The value to check.
 * @returns The value.
 * @throws {TypeError} When it is neither absent nor a function.
 */
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

/**
 * Returns `value` in lower case if it is an HTTP header name (an RFC 9110
 * token), else throws.
 *
 * @param name The option's name, for the message.
 * @param value The value to check.
 * @returns The header name, lower-cased.
 * @throws {TypeError} When it is not a header name.
 */
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

/**
 * Returns the set of header names in `value`, lower-cased, if it is a list
 * of them, else throws.
 *
 * @param name The option's name, for the message.
 * @param value The value to check.
 * @returns The names, lower-cased.
 * @throws {TypeError} When it is not a list of header names.
 */
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
