// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Kept only for `_lease.ts`, whose import the async work moves to
 * `_async.ts`: delete this file then.
 *
 * @module
 */

export { refTimer } from "./_async.ts";
