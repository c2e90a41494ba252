// Copyright 2026 the @idempotent/http authors. MIT license.
/** The CLI's times: an instant and how far it is from now. @module */

/**
 * `ms` as an ISO time and its distance from `now`: within a second either
 * way "just now" (a claim just made, on a server clock a little ahead, is
 * not "in 0 s"), else truncated toward now: "N s ago" for the past, "in N s"
 * only for the future; from 120 s on in minutes, from 2 h on in hours.
 */
export function time(ms: number | null, now: number = Date.now()): string {
  if (ms === null) return "(not kept by this store)";
  const diff = ms - now;
  const a = Math.trunc(Math.abs(diff) / 1000);
  const span = a < 120
    ? `${a} s`
    : a < 7200
    ? `${Math.round(a / 60)} min`
    : `${Math.round(a / 3600)} h`;
  const relative = a === 0
    ? "just now"
    : diff < 0
    ? `${span} ago`
    : `in ${span}`;
  return `${new Date(ms).toISOString()} (${relative})`;
}
