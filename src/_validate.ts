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
