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
 * Commits the record, fenced, with the handler's writes: `null` when both
 * committed, else the answer: 409 when the claim was lost; when the commit
 * failed, a fenced `release` asks whether it landed (`lost`: yes, 409; else 503).
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
  // A renewal would wait on the fenced write's row lock, or, committed
  // meanwhile, fail it under REPEATABLE READ or SERIALIZABLE.
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
