// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One attempt of a client operation ({@linkcode attempt}), and the wait
 * before the next ({@linkcode pause}).
 *
 * @module
 */

import type { ClientConfig } from "./_client_options.ts";
import type { Operation } from "./_client_prepare.ts";

/** What an attempt came back with: a response, or what `fetch` threw. */
export type Outcome = { response: Response } | { error: unknown };

/**
 * Sends one attempt of `operation`. A request that cannot be made (a bad URL
 * or header) is the caller's error: thrown as `fetch` throws it, uncounted.
 */
export async function attempt(
  config: ClientConfig,
  operation: Operation,
): Promise<Outcome> {
  const request = new Request(operation.input, operation.init);
  operation.attempts++;
  try {
    return { response: await config.fetch(request) };
  } catch (error) {
    return { error };
  }
}

/**
 * Waits `ms` through the configured `sleep`, which need not watch the
 * signal: an abort ends the wait, with {@linkcode Operation.stopped}.
 */
export async function pause(
  config: ClientConfig,
  operation: Operation,
  ms: number,
): Promise<void> {
  const { signal } = operation;
  if (!signal.aborted) {
    let abort = () => {};
    const aborted = new Promise<void>((resolve) => abort = resolve);
    signal.addEventListener("abort", abort, { once: true });
    try {
      await Promise.race([config.sleep(ms, signal), aborted]);
    } catch (error) {
      if (!signal.aborted) throw error;
    } finally {
      signal.removeEventListener("abort", abort);
    }
  }
  if (signal.aborted) throw operation.stopped();
}
