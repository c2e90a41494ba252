// Copyright 2026 the @idempotent/http authors. MIT license.
/** FailoverStore's peek and forget on both stores (docs/architecture.md, Inspect and forget). @module */

import { StoreError } from "../store.ts";
import type {
  AdminOperation,
  ForgetResult,
  IdempotencyStore,
  PeekResult,
} from "../store.ts";

type Role = "primary" | "fallback";
type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** `store[method]`, or a `TypeError` naming what is missing. */
export function adminMethod<M extends AdminOperation>(
  store: IdempotencyStore,
  role: Role,
  method: M,
): NonNullable<IdempotencyStore[M]> {
  const found = store[method];
  if (typeof found !== "function") {
    throw new TypeError(
      `FailoverStore.${method}() needs the ${role} store's ${method}(): it has none`,
    );
  }
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
): Promise<PeekResult> {
  const peekPrimary = adminMethod(primary, "primary", "peek");
  const peekFallback = adminMethod(fallback, "fallback", "peek");
  const [p, f] = await Promise.all([
    settle(() => peekPrimary(slot)),
    settle(() => peekFallback(slot)),
  ]);
  if (!p.ok) {
    if (!f.ok) throw failed("peek", [p.error, f.error]);
    return f.value;
  }
  if (!f.ok) return p.value;
  const primaryStands = p.value.state === "completed" ||
    (p.value.state !== "absent" && f.value.state !== "completed");
  return primaryStands ? p.value : f.value;
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
  if (!p.ok && !f.ok) throw failed("forget", [p.error, f.error]);
  if (!p.ok) throw failed("forget", [p.error], "primary");
  if (!f.ok) throw failed("forget", [f.error], "fallback");
  return p.value === "deleted" || f.value === "deleted" ? "deleted" : "absent";
}

async function settle<T>(call: () => Promise<T>): Promise<Settled<T>> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The failure of one store (`role`) or of both. */
function failed(
  op: AdminOperation,
  errors: unknown[],
  role?: Role,
): StoreError {
  const reasons = errors.map((e) =>
    (e as { message?: unknown } | null)?.message ?? String(e)
  );
  const message = role === undefined
    ? `Both stores failed to ${op}: primary: ${reasons[0]}; fallback: ${
      reasons[1]
    }`
    : `The ${role} store failed to ${op} (the other did): ${reasons[0]}`;
  const cause = role === undefined
    ? new AggregateError(
      errors,
      "The primary and the fallback store both failed",
    )
    : errors[0];
  return new StoreError(message, { operation: op, cause });
}
