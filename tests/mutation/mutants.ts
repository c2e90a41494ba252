// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The mutants `deno task mutate` applies, one at a time: small, realistic
 * bugs that the named test files must catch. Each part of the package has its
 * list under `mutants/` (the shape, the files and the test names they share
 * are in `_targets.ts`); the lists only grow: a bug that a test missed becomes
 * a mutant there, beside the test that now catches it.
 *
 * `text` must occur exactly once in `file` (the runner reports a stale mutant
 * with its file and text when code moved); keep it short, but long enough to
 * be unique.
 *
 * @module
 */

import type { Mutant } from "./_targets.ts";
import { MUTANTS as coreRequest } from "./mutants/core_request.ts";
import { MUTANTS as coreGuard } from "./mutants/core_guard.ts";
import { MUTANTS as coreCompletion } from "./mutants/core_completion.ts";
import { MUTANTS as coreKernel } from "./mutants/core_kernel.ts";
import { MUTANTS as tools } from "./mutants/tools.ts";
import { MUTANTS as client } from "./mutants/client.ts";
import { MUTANTS as storesSql } from "./mutants/stores_sql.ts";
import { MUTANTS as storesKvMemory } from "./mutants/stores_kv_memory.ts";
import { MUTANTS as storesRedis } from "./mutants/stores_redis.ts";
import { MUTANTS as storesDynamodb } from "./mutants/stores_dynamodb.ts";
import { MUTANTS as operability } from "./mutants/operability.ts";
import { MUTANTS as operabilityMore } from "./mutants/operability_more.ts";
import { MUTANTS as coreDialects } from "./mutants/core_dialects.ts";
import { MUTANTS as presets } from "./mutants/presets.ts";

export type { Mutant } from "./_targets.ts";

/** Every mutant, in the order they run. */
export const MUTANTS: Mutant[] = [
  ...coreRequest,
  ...coreGuard,
  ...coreCompletion,
  ...coreKernel,
  ...tools,
  ...client,
  ...storesSql,
  ...storesKvMemory,
  ...storesRedis,
  ...storesDynamodb,
  ...operability,
  ...operabilityMore,
  ...coreDialects,
  ...presets,
];
