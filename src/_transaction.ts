// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Settling a claim inside the handler's own transaction, for a store with
 * the {@linkcode IdempotencyStore.unitOfWork} capability (PostgresStore):
 * the record is written, fenced by the claim's token, in the transaction
 * that holds the handler's writes, and both commit or neither does.
 *
 * @module
 */

import type { Beat, Heartbeat } from "./_lease.ts";
import type { Report, WriteResult } from "./events.ts";
import { reject } from "./problem.ts";
import type { IdempotencyStore, StoredResponse, UnitOfWork } from "./store.ts";

/**
 * Commits the record with the handler's writes. Returns `null` when both
 * committed (the live response goes out), else the answer that replaces it:
 *
 * - the fenced write found the claim lost (a takeover after an expired
 *   lease): everything rolled back; 409, the new owner's answer will replay;
 * - the transaction failed (a serialization failure, a connection lost
 *   around COMMIT): whether it committed is asked with a fenced `release`
 *   outside it. `applied`: nothing committed and the slot is free, 503 (a
 *   retry runs, once). `lost`: it committed (or was taken over), 409 (a
 *   retry replays). No answer: 503, the lease frees the slot if nothing
 *   committed.
 *
 * @param unit The request's opened unit of work.
 * @param beat The claim; its renewals stop before the record is written.
 * @param record What to store.
 * @param context The store, the heartbeat, the reporter and the request.
 * @returns `null`, or the problem answer.
 */
export async function commitInTransaction(
  unit: UnitOfWork,
  beat: Beat,
  record: StoredResponse,
  context: {
    store: IdempotencyStore;
    heartbeat: Heartbeat;
    report: Report;
    request: Request;
  },
): Promise<Response | null> {
  const { store, heartbeat, report, request } = context;
  const { slot, token, started } = beat;
  // A renewal would wait on the row lock the fenced write takes, and under
  // REPEATABLE READ or SERIALIZABLE one committed meanwhile fails the write.
  heartbeat.stop(beat);
  const completed = (outcome: WriteResult) =>
    report(() => ({
      type: "completed",
      slot,
      stored: record.body === null ? record.omitted! : "full",
      bytes: record.body?.byteLength ?? 0,
      outcome,
      attempts: 1,
      background: false,
    }), started);
  try {
    const outcome = await unit.commit(record);
    if (outcome === "committed") {
      completed("applied");
      return null;
    }
    completed("lost");
    return reject(request, "inFlight", { retryAfter: 1 });
  } catch (error) {
    report(
      () => ({ type: "store_error", slot, operation: "complete", error }),
      started,
    );
  }
  let released: WriteResult;
  try {
    released = await store.release(slot, token);
  } catch (error) {
    report(
      () => ({ type: "store_error", slot, operation: "release", error }),
      started,
    );
    released = "unknown";
  }
  report(() => ({
    type: "released",
    slot,
    reason: "thrown",
    outcome: released,
    attempts: 1,
  }), started);
  if (released === "lost") {
    completed("unknown");
    return reject(request, "inFlight", { retryAfter: 1 });
  }
  return reject(request, "unavailable", {});
}
