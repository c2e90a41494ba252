// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * One app process of the SqliteStore transactional crash tests, as
 * `postgres_transaction_app.ts` is for PostgreSQL: `Deno.serve` on a free
 * port, guarded by a SqliteStore on PATH, printing `listening <port>`. Its
 * handler writes one row into the file's `effects` table in the request's
 * transaction and reports to the test's control server, which holds it at
 * each point until the test lets it go on (or kills it):
 *
 * - `inserted`: in the handler, right after its INSERT (the write lock held);
 * - `captured`: the body's bytes were read, before the record's write and COMMIT;
 * - `committed`: the `completed` event, after COMMIT (not held).
 *
 * Keys that start with `load-` report nothing.
 *
 *     deno run --allow-net --allow-env --allow-read --allow-write tests/_support/sqlite_transaction_app.ts PATH CONTROL_URL LEASE_MS
 *
 * @module
 */
import { idempotency } from "../../mod.ts";
import { SqliteStore } from "../../src/stores/sqlite.ts";

const [path, control, lease] = Deno.args;
const store = new SqliteStore({ database: path!, busyTimeoutMs: 200 });

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
    store.transactional(async (request, db) => {
      const key = request.headers.get("idempotency-key") ?? "";
      db.prepare("INSERT INTO effects (key, pid) VALUES (?, ?)").run(
        key,
        Deno.pid,
      );
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
        tell("committed", event.slot, { outcome: event.outcome }).catch(
          () => {},
        );
      },
    },
  ),
);
