// Copyright 2026 the @idempotent/http authors. MIT license.
/** Settling a claim in the handler's own transaction. @module */

import {
  reportCompleted,
  reportReleased,
  reportStoreError,
} from "./_completion.ts";
import type { Beat, Heartbeat } from "./_heartbeat.ts";
import type { Sealer } from "./_seal.ts";
import type { Report, WriteResult } from "./events.ts";
import { reject } from "./problem.ts";
import type { IdempotencyStore, StoredResponse, UnitOfWork } from "./store.ts";

/**
 * Commits the record, fenced by the claim's token, in the unit of work that
 * holds the handler's writes: both commit or neither does. Returns `null`
 * when both did, else the answer: the claim was lost (all rolled back): 409;
 * the transaction failed: a fenced `release` outside it asks whether it
 * committed (`applied`: no, 503; `lost`: yes, 409; no answer: 503).
 */
export async function commitInTransaction(
  unit: UnitOfWork,
  beat: Beat,
  record: StoredResponse,
  context: {
    store: IdempotencyStore;
    encryption: Sealer | undefined;
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
    const { encryption } = context;
    const stored = encryption && await encryption.seal(beat.slot, record);
    if (await unit.commit(stored ?? record) === "committed") {
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
