// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the transactional crash tests' app processes share
 * (`postgres_transaction_app.ts`, `mysql_transaction_app.ts`,
 * `sqlite_transaction_app.ts`: each makes its store and says how to write one
 * effect row): `Deno.serve` on a free port, printing `listening <port>`, a
 * transactional handler that writes the row and reports three points to the
 * test's control server, each of which holds the process there until the test
 * lets it go on (or kills it):
 *
 * - `inserted`: in the handler, right after its INSERT;
 * - `captured`: the body's bytes were read by the capture, which waits for
 *   the body's end: before the record's write and the COMMIT;
 * - `committed`: the `completed` event, after the COMMIT (not held: the
 *   test kills the process on hearing it).
 *
 * Keys that start with `load-` report nothing.
 *
 * @module
 */
import { idempotency, type IdempotencyStore } from "../../mod.ts";

/** One app: its store, its transactional wrapper and its effect's INSERT. */
export interface TransactionApp<T> {
  store: IdempotencyStore;
  transactional(
    handler: (request: Request, tx: T) => Promise<Response>,
  ): (request: Request) => Promise<Response>;
  /** Writes the effect row of `key` through the request's `tx`. */
  insert(tx: T, key: string): unknown;
  /** The test's control server. */
  control: string;
  lease: number;
}

/** Serves `app` as the module doc says. */
export function serveTransactionApp<T>(app: TransactionApp<T>): void {
  const tell = (
    point: string,
    key: string,
    extra: Record<string, string> = {},
  ): Promise<void> => {
    if (key.startsWith("load-")) return Promise.resolve();
    const query = new URLSearchParams({
      point,
      key,
      pid: String(Deno.pid),
      ...extra,
    });
    return fetch(`${app.control}/point?${query}`, { method: "POST" }).then(
      (r) => r.body?.cancel(),
    );
  };
  Deno.serve(
    {
      hostname: "127.0.0.1",
      port: 0,
      onListen({ port }) {
        // deno-lint-ignore no-console
        console.log(`listening ${port}`);
      },
    },
    idempotency(
      app.transactional(async (request, tx) => {
        const key = request.headers.get("idempotency-key") ?? "";
        await app.insert(tx, key);
        await tell("inserted", key);
        const body = new TextEncoder().encode(`${key} by ${Deno.pid}`);
        let sent = false;
        return new Response(
          new ReadableStream<Uint8Array>({
            async pull(controller) {
              if (!sent) {
                sent = true;
                controller.enqueue(body);
                return;
              }
              await tell("captured", key);
              controller.close();
            },
          }),
          { status: 201, headers: { "content-type": "text/plain" } },
        );
      }),
      {
        scope: "global",
        store: app.store,
        lease: app.lease,
        onEvent(event) {
          if (event.type !== "completed" || event.slot === null) return;
          // The slot is all the event has: the test maps it back to its key.
          tell("committed", event.slot, { outcome: event.outcome }).catch(
            () => {},
          );
        },
      },
    ),
  );
}
