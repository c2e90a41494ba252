// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Waiting for a state instead of for a duration: kept for the test files
 * that import `until` from here; the helper lives in `tests/_helpers.ts`.
 *
 * @module
 */

export { until } from "./_helpers.ts";
