// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * CORS: the middleware's own response headers (`Idempotent-Replayed`,
 * `Idempotency-TTL`, the omitted-body and omitted-headers ones, a problem's
 * `Retry-After`) added to `Access-Control-Expose-Headers` for a browser's
 * request (an `Origin`) or a response with `Access-Control-Allow-Origin`:
 * merged with the handler's or an earlier middleware's list, once each, in
 * any case, `*` not counted; with `Deno.serve`-style wrapping and with
 * `hono/cors` before or after `idempotent()`. A real browser reads them in
 * cors_browser_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { Hono } from "hono";
import { cors } from "hono/cors";
import { idempotency, MemoryStore } from "../mod.ts";
import { idempotent } from "../src/hono.ts";
import { exposed } from "../src/_response.ts";
import { problemResponse } from "../src/problem.ts";
import { deferred, until } from "./_support/time.ts";
import { post } from "./_support/http.ts";

const EXPOSE = "access-control-expose-headers";
const ORIGIN = { origin: "https://shop.test" };

/** The names a response exposes, lower case, in order. */
const exposedNames = (response: Response) =>
  (response.headers.get(EXPOSE) ?? "").split(",").map((n) =>
    n.trim().toLowerCase()
  ).filter((n) => n !== "");

Deno.test("a replay to a browser's request exposes Idempotent-Replayed; the same replay to a server's request is unchanged", async () => {
  const handler = idempotency(() => new Response("ok", { status: 201 }), {
    scope: "global",
  });
  await (await handler(post("k1", "{}", { headers: ORIGIN }))).text();
  const browser = await handler(post("k1", "{}", { headers: ORIGIN }));
  assert.equal(browser.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(exposedNames(browser), ["idempotent-replayed"]);
  const server = await handler(post("k1"));
  assert.deepEqual([...server.headers], [
    ["content-type", "text/plain;charset=UTF-8"],
    ["idempotent-replayed", "true"],
  ]);
});

Deno.test("a handler's own CORS headers: its Expose-Headers is kept as recorded and ours follow once, in any case, beside a *", async () => {
  const cases: [string | null, string][] = [
    [null, "idempotent-replayed"],
    ["X-Request-Id", "X-Request-Id, idempotent-replayed"],
    ["X-Request-Id, IDEMPOTENT-REPLAYED", "X-Request-Id, IDEMPOTENT-REPLAYED"],
    ["idempotent-replayed ,x-a", "idempotent-replayed ,x-a"],
    // Under credentials, * is a header's name: ours are listed beside it.
    ["*", "*, idempotent-replayed"],
  ];
  for (const [own, want] of cases) {
    const headers = new Headers({ "access-control-allow-origin": "*" });
    if (own !== null) headers.set(EXPOSE, own);
    const handler = idempotency(() => new Response("ok", { headers }), {
      scope: "global",
      store: new MemoryStore(),
    });
    const first = await handler(post("k1"));
    assert.equal(first.headers.get(EXPOSE), own, "nothing of ours to read");
    await first.text();
    // No Origin: the recorded Allow-Origin alone is enough.
    const replay = await handler(post("k1"));
    assert.equal(replay.headers.get(EXPOSE), want, `${own}`);
  }
});

Deno.test("the lifetime, the omitted body and a 409's Retry-After are exposed; a problem without them adds nothing", async () => {
  const gate = deferred();
  let runs = 0;
  const handler = idempotency(async () => {
    runs++;
    await gate.promise;
    return new Response("x".repeat(20));
  }, {
    scope: "global",
    advertiseLifetime: true,
    maxResponseBytes: 10,
  });
  const first = handler(post("k1", "{}", { headers: ORIGIN }));
  await until(() => runs === 1, "the claim");
  const busy = await handler(post("k1", "{}", { headers: ORIGIN }));
  assert.equal(busy.status, 409);
  assert.deepEqual(exposedNames(busy), ["retry-after"]);
  await busy.body?.cancel();
  gate.resolve();
  const live = await first;
  assert.deepEqual(exposedNames(live), ["idempotency-ttl"]);
  await live.text();
  const replay = await handler(post("k1", "{}", { headers: ORIGIN }));
  assert.deepEqual(exposedNames(replay), [
    "idempotent-replayed",
    "idempotency-ttl",
    "idempotent-body-omitted",
  ]);
  const reused = await handler(post("k1", '{"b":2}', { headers: ORIGIN }));
  assert.equal(reused.status, 422);
  assert.equal(reused.headers.has(EXPOSE), false);
  await reused.body?.cancel();
});

Deno.test("a Deno.serve-style CORS wrapper outside the middleware: replays and problems both readable, ours exposed before it added Allow-Origin", async () => {
  const api = idempotency(() => Response.json({ id: 1 }, { status: 201 }), {
    scope: "global",
  });
  const app = async (request: Request) => {
    const response = await api(request);
    const out = new Response(response.body, response);
    out.headers.set("access-control-allow-origin", ORIGIN.origin);
    return out;
  };
  await (await app(post("k1", "{}", { headers: ORIGIN }))).text();
  const replay = await app(post("k1", "{}", { headers: ORIGIN }));
  assert.equal(
    replay.headers.get("access-control-allow-origin"),
    ORIGIN.origin,
  );
  assert.deepEqual(exposedNames(replay), ["idempotent-replayed"]);
  const reused = await app(post("k1", '{"b":2}', { headers: ORIGIN }));
  assert.equal(reused.status, 422);
  assert.equal(
    reused.headers.get("access-control-allow-origin"),
    ORIGIN.origin,
  );
  await reused.body?.cancel();
});

Deno.test("hono/cors before idempotent(): its exposeHeaders list, laid over replays, gets ours added after; after it, problems go without Allow-Origin", async () => {
  const app = (corsFirst: boolean) => {
    const hono = new Hono();
    const policy = cors({
      origin: ORIGIN.origin,
      allowHeaders: ["Idempotency-Key", "Content-Type"],
      exposeHeaders: ["X-Request-Id"],
    });
    const guard = idempotent({ scope: "global", store: new MemoryStore() });
    if (corsFirst) hono.use("*", policy, guard);
    else hono.use("*", guard, policy);
    hono.post("/payments", (c) => c.json({ ok: true }, 201));
    return (body: string) =>
      hono.request("/payments", {
        method: "POST",
        headers: { "idempotency-key": "k1", ...ORIGIN },
        body,
      });
  };
  const outside = app(true);
  const first = await outside("{}");
  assert.deepEqual(exposedNames(first), ["x-request-id"]);
  await first.text();
  const replay = await outside("{}");
  assert.equal(
    replay.headers.get("access-control-allow-origin"),
    ORIGIN.origin,
  );
  assert.deepEqual(exposedNames(replay), [
    "x-request-id",
    "idempotent-replayed",
  ]);
  const reused = await outside('{"b":2}');
  assert.equal(reused.status, 422);
  assert.equal(
    reused.headers.get("access-control-allow-origin"),
    ORIGIN.origin,
  );
  await reused.body?.cancel();

  // After: a replay has the first response's Allow-Origin, from its record;
  // a problem has none, so a browser cannot read it.
  const inside = app(false);
  await (await inside("{}")).text();
  const recorded = await inside("{}");
  assert.equal(recorded.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(exposedNames(recorded), [
    "x-request-id",
    "idempotent-replayed",
  ]);
  await recorded.body?.cancel();
  const unreadable = await inside('{"b":2}');
  assert.equal(unreadable.status, 422);
  assert.equal(unreadable.headers.has("access-control-allow-origin"), false);
  await unreadable.body?.cancel();
});

Deno.test("hono/cors answers the preflight before idempotent() sees it: Idempotency-Key allowed", async () => {
  const hono = new Hono();
  hono.use(
    "*",
    cors({ origin: ORIGIN.origin, allowHeaders: ["Idempotency-Key"] }),
    idempotent({ scope: "global" }),
  );
  hono.post("/payments", (c) => c.json({ ok: true }));
  const preflight = await hono.request("/payments", {
    method: "OPTIONS",
    headers: {
      ...ORIGIN,
      "access-control-request-method": "POST",
      "access-control-request-headers": "idempotency-key",
    },
  });
  assert.equal(preflight.status, 204);
  assert.equal(
    preflight.headers.get("access-control-allow-headers"),
    "Idempotency-Key",
  );
});

Deno.test("exposed(): every name listed before stays, each of ours the response carries is listed exactly once, nothing else is added (property)", () => {
  const ours = [
    "idempotent-replayed",
    "idempotency-ttl",
    "idempotent-body-omitted",
    "idempotent-omitted-headers",
  ];
  const name = fc.oneof(
    fc.constantFrom(...ours, "retry-after", "*", "x-request-id"),
    fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/),
  );
  const spelled = fc.tuple(name, fc.boolean(), fc.constantFrom("", " ", "\t"))
    .map(([n, upper, pad]) => `${pad}${upper ? n.toUpperCase() : n}${pad}`);
  fc.assert(
    fc.property(
      fc.option(fc.array(spelled, { maxLength: 5 })),
      fc.subarray([...ours, "retry-after"]),
      fc.boolean(),
      fc.boolean(),
      (listed, carried, origin, problem) => {
        const headers = new Headers([["access-control-allow-origin", "*"]]);
        if (listed !== null) headers.set(EXPOSE, listed.join(","));
        for (const n of carried) headers.set(n, "1");
        const request = new Request("http://api.test/", {
          headers: origin ? ORIGIN : {},
        });
        const response = problem
          ? problemResponse(request, "reused", {}) as Response
          : new Response(null, { headers });
        if (problem) {
          for (const [n, v] of headers) {
            response.headers.set(n, v);
          }
        }
        const before = response.headers.get(EXPOSE);
        const out = exposed(request, response, "idempotent-replayed");
        const names = exposedNames(out);
        const was = new Set(
          (listed ?? []).map((n) => n.trim().toLowerCase()),
        );
        for (const n of was) if (n !== "") assert.ok(names.includes(n));
        const want = carried.filter((n) =>
          n !== "retry-after" || problem || was.has(n)
        );
        for (const n of want) {
          assert.equal(names.filter((m) => m === n).length >= 1, true, n);
          if (!was.has(n)) {
            assert.equal(names.filter((m) => m === n).length, 1, n);
          }
        }
        for (const n of names) assert.ok(was.has(n) || want.includes(n), n);
        // What was listed stays as it was, our names after it.
        if (before !== null) {
          assert.ok(out.headers.get(EXPOSE)!.startsWith(before));
        }
      },
    ),
  );
});
