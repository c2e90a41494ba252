// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One app process of MysqlStore's transactional crash tests: `Deno.serve` on a free
 * port, guarded by a MysqlStore, printing `listening <port>` when it
 * listens. Its handler writes one effect row in the request's transaction
 * and reports three points to the test's control server, each of which
 * holds the process there until the test lets it go on (or kills it):
 *
 * - `inserted`: in the handler, right after its INSERT;
 * - `captured`: the body's bytes were read by the capture, which waits for
 *   the body's end: before the record's write and the COMMIT;
 * - `committed`: the `completed` event, after the COMMIT (not held: the
 *   test kills the process on hearing it).
 *
 * Keys that start with `load-` report nothing.
 *
 *     deno run --allow-net --allow-env --allow-read tests/_support/mysql_transaction_app.ts MYSQL_URL TABLE EFFECTS CONTROL_URL LEASE_MS
 *
 * @module
 */
import mysql from "mysql2/promise";
import { idempotency } from "../../mod.ts";
import { MysqlStore } from "../../src/stores/mysql.ts";

const [url, table, effects, control, lease] = Deno.args;
const pool = mysql.createPool({
  uri: url!,
  connectionLimit: 8,
  connectTimeout: 2000,
});
const store = new MysqlStore({ pool, table: table! });

function tell(
  point: string,
  key: string,
  extra: Record<string, string> = {},
): Promise<void> {
  if (key.startsWith("load-")) return Promise.resolve();
  const query = new URLSearchParams({
    point,
    key,
    pid: String(Deno.pid),
    ...extra,
  });
  return fetch(`${control}/point?${query}`, { method: "POST" }).then((r) =>
    r.body?.cancel()
  );
}

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
    store.transactional(async (request, tx) => {
      const key = request.headers.get("idempotency-key") ?? "";
      await tx.execute(`INSERT INTO ${effects} (k, pid) VALUES (?, ?)`, [
        key,
        Deno.pid,
      ]);
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
      store,
      lease: Number(lease),
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
