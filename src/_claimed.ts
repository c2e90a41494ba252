// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The requests a guard handed its handler under a claim, so that a store's
 * transactional wrapper tells a request another store claimed (refused) from
 * one no store claimed (its own plain transaction): docs/architecture.md,
 * Transactional handlers. @module
 */

const CLAIMED = new WeakSet<Request>();

/** Marks `request` as handed to a handler under a claim. */
export function markClaimed(request: Request): void {
  CLAIMED.add(request);
}

/** Whether a guard handed `request` to its handler under a claim. */
export function isClaimed(request: Request): boolean {
  return CLAIMED.has(request);
}
