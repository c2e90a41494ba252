// Copyright 2026 the @idempotent/http authors. MIT license.
/** The contract's types, re-exported by every store's entry point. @module */

export type {
  AdminOperation,
  ClaimOptions,
  ClaimResult,
  FailoverEvent,
  FailoverRole,
  ForgetResult,
  IdempotencyStore,
  OmittedReason,
  PeekOptions,
  PeekResult,
  StoredResponse,
  StoreEvent,
  StoreOperation,
  StoreReport,
  StoreStats,
  UnitOfWork,
  WriteOutcome,
} from "../store.ts";
export { StoreError } from "../store.ts";
