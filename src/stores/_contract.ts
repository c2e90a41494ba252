// Copyright 2026 the @idempotent/http authors. MIT license.
/** The contract's types, re-exported by every store's entry point. @module */

export type {
  ClaimOptions,
  ClaimResult,
  IdempotencyStore,
  OmittedReason,
  StoredResponse,
  StoreOperation,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
export { StoreError } from "../store.ts";
