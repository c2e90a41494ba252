// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The contract's types, re-exported by every store's entry point so that its
 * documentation is complete on its own.
 *
 * @module
 */

export type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  OmittedReason,
  StoredResponse,
  StoreOperation,
  WriteOutcome,
} from "../store.ts";
export { StoreError } from "../store.ts";
