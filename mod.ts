// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Idempotency-Key middleware for Web-standard fetch handlers (`Deno.serve`,
 * Hono, Oak, Fresh): a `POST` or `PATCH` that carries an `Idempotency-Key`
 * runs its handler at most once per key, and every retry gets the first
 * response back, byte for byte.
 *
 * - A retry after the first response: the same status, headers and bytes,
 *   with `Idempotent-Replayed: true`.
 * - A retry while the first is still running: 409, with `Retry-After`.
 * - The key reused for another request: 422.
 * - The store down: 503 (or, with `failOpen`, the handler unguarded).
 *
 * Errors are RFC 9457 problem responses. Stores: {@linkcode MemoryStore}
 * here; `KvStore`, `RedisStore`, `PostgresStore` and `FailoverStore` on
 * their own subpaths, so that importing this module loads no driver. The
 * store contract (for a store's author) is `@idempotent/http/store`; the
 * operator's tools (`inspectKey`, `forgetKey`, `inspectStats`) are
 * `@idempotent/http/inspect`. See {@linkcode idempotency} for an example.
 *
 * @module
 */

export {
  BODY_OMITTED_HEADER,
  drainCompletions,
  type FetchHandler,
  HEADERS_OMITTED_HEADER,
  idempotency,
  type IdempotencyOptions,
  LIFETIME_HEADER,
  type Logger,
  type ServeHandlerInfo,
} from "./src/idempotency.ts";
export type { EventBase, IdempotencyEvent, WriteResult } from "./src/events.ts";
export {
  type Problem,
  PROBLEM_TYPES,
  type ProblemCode,
  type ProblemRenderer,
  type ProblemToRender,
  type ProblemTypes,
} from "./src/problem.ts";
export {
  MAX_KEY_LENGTH,
  type ParsedKey,
  parseIdempotencyKey,
} from "./src/key.ts";
export {
  jsonFingerprint,
  requestFingerprint,
  slotOf,
} from "./src/fingerprint.ts";
export { type EncryptionKeys, importEncryptionKeys } from "./src/encryption.ts";
export { type IdempotencyStore, StoreError } from "./src/store.ts";
export { MemoryStore, type MemoryStoreOptions } from "./src/stores/memory.ts";
