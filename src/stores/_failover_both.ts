// Copyright 2026 the @idempotent/http authors. MIT license.
/** FailoverStore's calls on both stores: peek, forget, and the errors of both (docs/architecture.md, Inspect and forget). @module */

import { assertMethod, messageOf } from "../_validate.ts";
import { StoreError } from "../store.ts";
import type {
  AdminOperation,
  ForgetResult,
  IdempotencyStore,
  PeekOptions,
  PeekResult,
} from "../store.ts";
import type { Operation } from "./_store_call.ts";
import { claimFinds, settle } from "./_shared.ts";

type Role = "primary" | "fallback";

/** `store[method]`, or a `TypeError` naming what is missing. */
export function adminMethod<M extends AdminOperation>(
  store: IdempotencyStore,
  role: Role,
  method: M,
): NonNullable<IdempotencyStore[M]> {
  assertMethod(
    store,
    method,
    `FailoverStore.${method}() needs the ${role} store's ${method}(): it has none`,
  );
  const found = store[method] as (...args: unknown[]) => unknown;
  return found.bind(store) as NonNullable<IdempotencyStore[M]>;
}

/**
 * What a claim would find: the primary's record when it is completed or the
 * fallback has none, else the fallback's; one store's when the other throws.
 */
export async function peekBoth(
  primary: IdempotencyStore,
  fallback: IdempotencyStore,
  slot: string,
  options?: PeekOptions,
): Promise<PeekResult> {
  const peekPrimary = adminMethod(primary, "primary", "peek");
  const peekFallback = adminMethod(fallback, "fallback", "peek");
  const [p, f] = await Promise.all([
    settle(() => peekPrimary(slot, options)),
    settle(() => peekFallback(slot, options)),
  ]);
  if (!p.ok && !f.ok) throw bothFailed("peek", "peek", p.error, f.error);
  return claimFinds(p.ok ? p.value : null, f.ok ? f.value : null)!;
}

/** Forgets the slot in both stores: `deleted` if either held it; throws if either threw. */
export async function forgetBoth(
  primary: IdempotencyStore,
  fallback: IdempotencyStore,
  slot: string,
): Promise<ForgetResult> {
  const forgetPrimary = adminMethod(primary, "primary", "forget");
  const forgetFallback = adminMethod(fallback, "fallback", "forget");
  const [p, f] = await Promise.all([
    settle(() => forgetPrimary(slot)),
    settle(() => forgetFallback(slot)),
  ]);
  if (!p.ok && !f.ok) throw bothFailed("forget", "forget", p.error, f.error);
  if (!p.ok) throw oneFailed("primary", p.error);
  if (!f.ok) throw oneFailed("fallback", f.error);
  return p.value === "deleted" || f.value === "deleted" ? "deleted" : "absent";
}

/** One store's forget failed: a copy may be left there. */
function oneFailed(role: Role, error: unknown): StoreError {
  const message = `The ${role} store failed to forget (the other did): ${
    messageOf(error)
  }`;
  return new StoreError(message, { operation: "forget", cause: error });
}

/** Both stores failed `operation` (`what` says how). */
export function bothFailed(
  operation: Operation,
  what: string,
  primary: unknown,
  fallback: unknown,
): StoreError {
  const message = `Both stores failed to ${what}: primary: ${
    messageOf(primary)
  }; fallback: ${messageOf(fallback)}`;
  const cause = new AggregateError(
    [primary, fallback],
    "The primary and the fallback store both failed",
  );
  return new StoreError(message, { operation, cause });
}
