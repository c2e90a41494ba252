// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A webhook keyed by the event id in its JSON body (the `key` option), its
 * body compared by value (`jsonFingerprint`): a provider that delivers one
 * event twice, the second time written anew, gets the first answer back and
 * the handler runs once:
 *
 *     deno run --allow-net=127.0.0.1 examples/webhook.ts
 *
 * @module
 */
// deno-lint-ignore-file no-console
import { idempotency, jsonFingerprint } from "@idempotent/http";

let handled = 0;
const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen() {} },
  idempotency(async (req) => {
    const event = await req.json();
    handled++; // your side effect, once per event id
    return Response.json({ received: event.id });
  }, {
    scope: "global", // one sender; scope by sender when there are several
    key: (_req, body) => JSON.parse(new TextDecoder().decode(body)).id,
    fingerprint: jsonFingerprint,
    required: true, // a delivery without an id: 400
  }),
);

const url = `http://127.0.0.1:${server.addr.port}/hooks`;
const deliver = (body: string) => fetch(url, { method: "POST", body });
const first = await deliver('{"id":"evt_1","type":"charge.succeeded"}');
console.log(`first: ${first.status} ${await first.text()}`);
const again = await deliver('{ "type": "charge.succeeded", "id": "evt_1" }');
console.log(
  `again: ${again.status} ${await again.text()}, replayed: ${
    again.headers.get("idempotent-replayed")
  }`,
);
console.log(`events handled: ${handled}`);
await server.shutdown();
