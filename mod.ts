// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Idempotency-Key middleware for Web-standard fetch handlers.
 *
 * @module
 */

export * from "./src/store.ts";
export * from "./src/stores/memory.ts";
