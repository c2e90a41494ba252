// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Moved to `options.ts`; this re-export only keeps `_completion.ts` (another
 * branch's) compiling until the merge points it there and deletes this file.
 *
 * @module
 */

export type { Config } from "./options.ts";
