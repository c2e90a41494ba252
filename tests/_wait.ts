// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Waiting for a state instead of for a duration.
 *
 * @module
 */

/**
 * Resolves once `check()` holds, looking again every few milliseconds. It
 * waits for a state, however long the machine takes to reach it; the bound
 * is only there so that a state never reached fails the test instead of
 * hanging it.
 *
 * @param check What must hold.
 * @param what What is awaited, for the failure message.
 * @param giveUpMs When to fail instead of hanging.
 */
export async function until(
  check: () => boolean,
  what: string,
  giveUpMs = 30_000,
): Promise<void> {
  const end = performance.now() + giveUpMs;
  while (!check()) {
    if (performance.now() > end) {
      throw new Error(`Gave up waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
