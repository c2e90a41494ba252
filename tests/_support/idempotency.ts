// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the idempotency_*_test.ts files share: the response cap they test
 * around, and a handler that counts its runs.
 *
 * @module
 */

import type { Clock } from "../../src/_async.ts";
import { configure } from "../../src/_configure.ts";
import { guarding } from "../../src/idempotency.ts";
import type {
  FetchHandler,
  IdempotencyOptions,
  ServeHandlerInfo,
} from "../../src/options.ts";

/** The `maxResponseBytes` the capture tests set. */
export const CAP = 1024;

/** A handler that counts its runs, `make` building each run's response. */
export function counting(
  make: (req: Request, n: number) => Response | Promise<Response>,
): {
  state: { runs: number };
  handler: (req: Request) => Promise<Response>;
} {
  const state = { runs: 0 };
  const handler = async (req: Request) => {
    state.runs++;
    return await make(req, state.runs);
  };
  return { state, handler };
}

/** `idempotency()` with every timed step on `clock` (a `FakeClock`). */
export function idempotencyOn<A extends unknown[] = [info?: ServeHandlerInfo]>(
  clock: Clock,
  handler: FetchHandler<A>,
  options: IdempotencyOptions,
): FetchHandler<A> {
  return guarding(handler, configure(options, clock));
}
