// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The requests a guard hands its handler under a claim, so that a store's
 * transactional wrapper refuses one another store claimed and gives one no
 * store claimed its own (docs/architecture.md, Transactional handlers); marked
 * by a property, not a `WeakSet`, which hashed each request (~2 µs). @module
 */

const CLAIMED = Symbol("claimed");

/** Marks `request` as handed to a handler under a claim. */
export function markClaimed(request: Request): void {
  (request as { [CLAIMED]?: true })[CLAIMED] = true;
}

/** Whether a guard handed `request` to its handler under a claim. */
export function isClaimed(request: Request): boolean {
  return (request as { [CLAIMED]?: true })[CLAIMED] === true;
}
