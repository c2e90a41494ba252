// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A small payments API behind `idempotency()`, and a flaky client that does
 * what real clients do: fires duplicate retries at once, retries after a
 * success, loses a response and retries until it gets one, and reuses a key
 * for another amount. It prints what happened and exits.
 *
 *     deno task demo            # the embedded default store (MemoryStore)
 *     deno task demo --kv       # Deno KV (an in-memory database)
 *
 * @module
 */
// deno-lint-ignore-file no-console
import { idempotency, type IdempotencyStore } from "../mod.ts";
import { KvStore } from "../src/stores/kv.ts";

const useKv = Deno.args.includes("--kv");
const kv = useKv ? await Deno.openKv(":memory:") : undefined;
const store: IdempotencyStore | undefined = kv
  ? new KvStore({ kv })
  : undefined;

// ------------------------------------------------------------------ the API

const executions = new Map<string, number>();
let nextId = 1;

async function payments(req: Request): Promise<Response> {
  const { amount, order } = await req.json();
  executions.set(order, (executions.get(order) ?? 0) + 1);
  await new Promise((r) => setTimeout(r, 80)); // talk to the card network
  return Response.json({
    id: `pay_${nextId++}`,
    order,
    amount,
    status: "succeeded",
  }, { status: 201 });
}

const tally = { replayed: 0, conflict: 0, mismatch: 0 };
const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen() {} },
  idempotency(payments, {
    // The demo's API has one client, the flaky one below: one key space. An
    // API with users scopes by the authenticated user's stable id.
    scope: "global",
    ...(store ? { store } : {}),
    onEvent(event) {
      if (event.type === "replayed") tally.replayed++;
      if (event.type === "conflict") tally.conflict++;
      if (event.type === "mismatch") tally.mismatch++;
    },
  }),
);
const url = `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}/payments`;

// ---------------------------------------------------------------- the client

function pay(
  key: string,
  order: string,
  amount: number,
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "idempotency-key": key, "content-type": "application/json" },
    body: JSON.stringify({ order, amount }),
    ...(signal ? { signal } : {}),
  });
}

async function summary(res: Response): Promise<string> {
  const replay = res.headers.get("idempotent-replayed") === "true"
    ? " (replayed)"
    : "";
  const body = await res.json();
  const what = res.ok ? `${body.id}, ${body.amount} cents` : body.title;
  return `${res.status} ${what}${replay}`;
}

const lines: string[] = [];
const say = (line: string) => lines.push(line);

say("1. Five duplicate retries of one payment, all at once");
const burst = await Promise.all(
  Array.from({ length: 5 }, () => pay("key-A", "order-A", 1999)),
);
for (const res of burst) say(`   ${await summary(res)}`);

say("2. The same payment retried after it succeeded");
say(`   ${await summary(await pay("key-A", "order-A", 1999))}`);

say("3. The client loses a response, then retries until it gets an answer");
const lost = new AbortController();
const first = pay("key-B", "order-B", 500, lost.signal).catch(() => undefined);
await new Promise((r) => setTimeout(r, 20));
lost.abort(); // the connection drops while the payment is processed
await first;
for (let attempt = 1;; attempt++) {
  const res = await pay("key-B", "order-B", 500);
  const text = await summary(res);
  say(`   attempt ${attempt}: ${text}`);
  if (res.status !== 409) break;
  // Wait as long as the server says, as a client would (Retry-After is in
  // seconds): the middleware has seen how long a payment takes.
  const seconds = Number(res.headers.get("retry-after") ?? 1);
  say(`   (409: Retry-After ${seconds} s)`);
  await new Promise((r) => setTimeout(r, seconds * 1000));
}

say("4. A bug reuses a key for another amount");
say(`   ${await summary(await pay("key-A", "order-A", 2999))}`);

await server.shutdown();
kv?.close();

const rows = [...executions].map(([order, n]) => `   ${order}: executed ${n}×`);
console.log(
  `@idempotent/http demo on ${useKv ? "KvStore (Deno KV)" : "MemoryStore"}\n`,
);
console.log(lines.join("\n"));
console.log(`\nExecutions per payment:\n${rows.join("\n")}`);
console.log(
  `Replays: ${tally.replayed}, 409 in flight: ${tally.conflict}, 422 key reused: ${tally.mismatch}`,
);
const once = [...executions.values()].every((n) => n === 1);
console.log(once ? "Every payment ran exactly once." : "A payment ran twice!");
if (!once) Deno.exit(1);
