// Copyright 2026 the @idempotent/http authors. MIT license.
/** Settling a claim in the handler's own transaction. @module */

import {
  reportCompleted,
  reportReleased,
  reportStoreError,
} from "./_completion.ts";
import type { Beat, Heartbeat } from "./_heartbeat.ts";
import type { Report, WriteResult } from "./events.ts";
import { reject } from "./problem.ts";
import type { IdempotencyStore, StoredResponse, UnitOfWork } from "./store.ts";

/**
 * Commits the record, fenced by the claim's token, in the unit of work that
 * holds the handler's writes ({@linkcode IdempotencyStore.unitOfWork}):
 * both commit or neither does. Returns `null` when both committed (the live
 * response goes out), else the answer that replaces it:
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
  // A renewal would wait on the row lock the fenced write takes, and under
  // REPEATABLE READ or SERIALIZABLE one committed meanwhile fails the write.
  heartbeat.stop(beat);
  try {
    if (await unit.commit(record) === "committed") {
      reportCompleted(report, beat, record, "applied");
      return null;
    }
    reportCompleted(report, beat, record, "lost");
    return reject(request, "inFlight", { retryAfter: 1 });
  } catch (error) {
    reportStoreError(report, beat, "complete", error);
  }
  let released: WriteResult = "unknown";
  try {
    released = await store.release(beat.slot, beat.token);
  } catch (error) {
    reportStoreError(report, beat, "release", error);
  }
  reportReleased(report, beat, "thrown", released);
  if (released === "lost") {
    reportCompleted(report, beat, record, "unknown");
    return reject(request, "inFlight", { retryAfter: 1 });
  }
  return reject(request, "unavailable", {});
}
