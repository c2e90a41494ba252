// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The Hono adapter on a real `new Hono()` app, driven by `app.request` and
 * once over loopback by `Deno.serve(app.fetch)`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Hono, type MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { setCookie } from "hono/cookie";
import { idempotent } from "../src/hono.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { PROBLEM_TYPES } from "../src/problem.ts";
import { deferred } from "./_support/time.ts";
import { pattern, sameBytes } from "./_support/bytes.ts";
import { recorder } from "./_support/stores.ts";

function pay(
  app: Hono,
  key: string | null,
  body: string = JSON.stringify({ amount: 100 }),
  path = "/payments",
  headers: Record<string, string> = {},
): Promise<Response> {
  return Promise.resolve(app.request(path, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(key === null ? {} : { "idempotency-key": key }),
      ...headers,
    },
    body,
  }));
}

async function bytes(response: Response): Promise<Uint8Array> {
  return new Uint8Array(await response.arrayBuffer());
}

Deno.test("idempotent() type-checks as a Hono MiddlewareHandler", () => {
  const middleware: MiddlewareHandler = idempotent({ scope: "global" });
  assert.equal(typeof middleware, "function");
});

Deno.test("idempotent() validates its options eagerly", () => {
  assert.throws(() => idempotent({ scope: "global", ttl: -1 }), RangeError);
  assert.throws(
    () => idempotent({ scope: "global", methods: [] as unknown as string[] }),
    TypeError,
  );
});

Deno.test("idempotent() runs the route once per key and replays the same bytes", async () => {
  const seen: unknown[] = [];
  const app = new Hono();
  app.post(
    "/payments",
    idempotent({ scope: "global", store: new MemoryStore() }),
    async (c) => {
      const body = await c.req.json();
      seen.push(body);
      c.header("x-charge", `ch_${seen.length}`);
      return c.json({ charged: body.amount, n: seen.length }, 201);
    },
  );
  const first = await pay(app, "order-1");
  assert.equal(first.status, 201);
  assert.equal(first.headers.get("idempotent-replayed"), null);
  const firstBytes = await bytes(first);
  for (let i = 0; i < 2; i++) {
    const retry = await pay(app, "order-1");
    assert.equal(retry.status, 201);
    assert.equal(retry.headers.get("idempotent-replayed"), "true");
    assert.equal(retry.headers.get("x-charge"), "ch_1");
    assert.equal(retry.headers.get("content-type"), "application/json");
    assert.ok(sameBytes(await bytes(retry), firstBytes));
  }
  assert.deepEqual(
    seen,
    [{ amount: 100 }],
    "the route ran once, with the body",
  );
  assert.equal((await pay(app, "order-2")).status, 201);
  assert.equal(seen.length, 2, "another key runs the route again");
});

Deno.test("idempotent() hands the routes after it the buffered body through c.req.raw and c.req.text()", async () => {
  const app = new Hono();
  app.use("/echo", idempotent({ scope: "global" }));
  app.use("/echo", async (c, next) => {
    c.set("raw" as never, (await c.req.raw.clone().text()) as never);
    await next();
  });
  app.post("/echo", async (c) => {
    return c.text(`${c.get("raw" as never)}|${await c.req.text()}`);
  });
  const response = await pay(app, "echo", "hello", "/echo");
  assert.equal(await response.text(), "hello|hello");
});

Deno.test("idempotent() keeps a live body over the record's cap intact and replays it without a body", async () => {
  const body = pattern(10_000, 9);
  let runs = 0;
  const app = new Hono();
  app.post(
    "/blob",
    idempotent({ scope: "global", maxResponseBytes: 1024 }),
    (c) => {
      runs++;
      return c.body(body, 200, { "content-type": "application/octet-stream" });
    },
  );
  const live = await pay(app, "blob", "{}", "/blob");
  assert.ok(sameBytes(await bytes(live), body), "the live bytes, once each");
  const replay = await pay(app, "blob", "{}", "/blob");
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.headers.get("idempotent-body-omitted"), "too_large");
  assert.equal((await bytes(replay)).byteLength, 0);
  assert.equal(runs, 1);
});

Deno.test("idempotent() answers 409 while the first request is in flight", async () => {
  const gate = deferred();
  const entered = deferred();
  let runs = 0;
  const app = new Hono();
  app.post("/payments", idempotent({ scope: "global" }), async (c) => {
    runs++;
    entered.resolve();
    await gate.promise;
    return c.json({ ok: true }, 201);
  });
  const first = pay(app, "slow");
  await entered.promise;
  const racing = await pay(app, "slow");
  assert.equal(racing.status, 409);
  assert.equal(racing.headers.get("content-type"), "application/problem+json");
  assert.ok(racing.headers.get("retry-after"));
  assert.equal((await racing.json()).type, PROBLEM_TYPES.inFlight);
  gate.resolve();
  assert.equal((await first).status, 201);
  assert.equal(
    (await pay(app, "slow")).headers.get("idempotent-replayed"),
    "true",
  );
  assert.equal(runs, 1);
});

Deno.test("idempotent() answers 422 when the key is reused with another body", async () => {
  let runs = 0;
  const app = new Hono();
  app.post("/payments", idempotent({ scope: "global" }), (c) => {
    runs++;
    return c.json({ ok: true }, 201);
  });
  assert.equal((await pay(app, "reuse", '{"amount":1}')).status, 201);
  const reused = await pay(app, "reuse", '{"amount":2}');
  assert.equal(reused.status, 422);
  assert.equal((await reused.json()).type, PROBLEM_TYPES.reused);
  assert.equal(runs, 1);
});

Deno.test("idempotent() releases the key on a non-2xx, a thrown error and a notFound", async () => {
  const log = recorder();
  let runs = 0;
  const app = new Hono();
  app.onError((_error, c) => c.text("error", 500));
  app.use("/api/*", idempotent({ scope: "global", onEvent: log.onEvent }));
  app.post("/api/flaky", (c) => {
    runs++;
    return runs === 1 ? c.json({ error: "busy" }, 503) : c.json({ runs }, 201);
  });
  app.post("/api/throws", () => {
    runs++;
    throw new Error("boom");
  });
  assert.equal((await pay(app, "k1", "{}", "/api/flaky")).status, 503);
  const second = await pay(app, "k1", "{}", "/api/flaky");
  assert.equal(second.status, 201, "a retry runs the route again");
  assert.equal(second.headers.get("idempotent-replayed"), null);
  assert.equal((await pay(app, "k2", "{}", "/api/throws")).status, 500);
  assert.equal((await pay(app, "k2", "{}", "/api/throws")).status, 500);
  assert.equal((await pay(app, "k3", "{}", "/api/missing")).status, 404);
  assert.equal((await pay(app, "k3", "{}", "/api/missing")).status, 404);
  assert.equal(runs, 4);
  const released = log.events.filter((e) => e.type === "released");
  assert.equal(released.length, 5);
  assert.ok(
    released.every((e) => e.type === "released" && e.outcome === "applied"),
  );
});

Deno.test("idempotent() releases the key when the routes after it leave no response", async () => {
  const log = recorder();
  const errors: unknown[] = [];
  const app = new Hono();
  app.onError((error, c) => {
    errors.push(error);
    return c.text("error", 500);
  });
  app.use("/payments", idempotent({ scope: "global", onEvent: log.onEvent }));
  app.use("/payments", async () => {});
  assert.equal((await pay(app, "void")).status, 500);
  assert.match(String(errors[0]), /not finalized after idempotent\(\)/);
  assert.deepEqual(log.types(), ["claimed", "released"]);
});

Deno.test("idempotent() replays every Set-Cookie of the response, in order", async () => {
  const app = new Hono();
  const optIn = { scope: "global", storeSetCookie: true } as const;
  app.post("/login", idempotent(optIn), (c) => {
    setCookie(c, "session", "s1", { httpOnly: true, path: "/" });
    setCookie(c, "csrf", "c1", { path: "/" });
    c.header("set-cookie", "theme=dark", { append: true });
    return c.json({ ok: true });
  });
  const first = await pay(app, "login", "{}", "/login");
  const cookies = first.headers.getSetCookie();
  assert.equal(cookies.length, 3);
  const replay = await pay(app, "login", "{}", "/login");
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(replay.headers.getSetCookie(), cookies);
});

Deno.test("idempotent() lays the headers of earlier middleware over replays and problems, cookies added", async () => {
  let request = 0;
  const app = new Hono();
  app.use("*", cors({ origin: "https://shop.test" }));
  app.use("*", async (c, next) => {
    request++;
    c.header("x-request-id", `req-${request}`);
    setCookie(c, "seen", String(request));
    await next();
    c.header("x-after", "yes");
  });
  const optIn = { scope: "global", storeSetCookie: true } as const;
  app.post("/payments", idempotent(optIn), (c) => {
    setCookie(c, "receipt", "r1");
    return c.json({ ok: true }, 201);
  });
  const origin = { origin: "https://shop.test" };
  const first = await pay(app, "cors", "{}", "/payments", origin);
  assert.equal(first.status, 201);
  assert.equal(first.headers.get("x-request-id"), "req-1");
  assert.deepEqual(first.headers.getSetCookie(), [
    "seen=1; Path=/",
    "receipt=r1; Path=/",
  ]);
  const replay = await pay(app, "cors", "{}", "/payments", origin);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(
    replay.headers.get("access-control-allow-origin"),
    "https://shop.test",
  );
  assert.equal(replay.headers.get("x-request-id"), "req-2", "this request's");
  assert.equal(replay.headers.get("x-after"), "yes");
  assert.equal(replay.headers.get("content-type"), "application/json");
  assert.deepEqual(replay.headers.getSetCookie(), [
    "seen=1; Path=/",
    "receipt=r1; Path=/",
    "seen=2; Path=/",
  ]);
  const reused = await pay(app, "cors", '{"x":1}', "/payments", origin);
  assert.equal(reused.status, 422);
  assert.equal(reused.headers.get("content-type"), "application/problem+json");
  assert.equal(
    reused.headers.get("access-control-allow-origin"),
    "https://shop.test",
  );
});

Deno.test("idempotent() refuses a guarded request whose body an earlier middleware read", async () => {
  const errors: unknown[] = [];
  let runs = 0;
  const app = new Hono();
  app.onError((error, c) => {
    errors.push(error);
    return c.text("error", 500);
  });
  app.use("/payments", async (c, next) => {
    await c.req.json();
    await next();
  });
  app.post("/payments", idempotent({ scope: "global" }), (c) => {
    runs++;
    return c.json({ ok: true }, 201);
  });
  assert.equal((await pay(app, "early")).status, 500);
  assert.ok(errors[0] instanceof TypeError);
  assert.match(errors[0].message, /read before idempotent\(\)/);
  assert.equal((await pay(app, null)).status, 201, "without a key it passes");
  assert.equal(runs, 1);
});

Deno.test("idempotent() leaves a route without it untouched", async () => {
  let runs = 0;
  const app = new Hono();
  app.post(
    "/guarded",
    idempotent({ scope: "global" }),
    (c) => c.json({ n: ++runs }, 201),
  );
  app.post("/open", (c) => c.json({ n: ++runs }, 201));
  await pay(app, "same", "{}", "/open");
  const second = await pay(app, "same", "{}", "/open");
  assert.equal(second.headers.get("idempotent-replayed"), null);
  assert.deepEqual(await second.json(), { n: 2 });
});

Deno.test("idempotent() on a prefix passes GET requests and keyless POSTs through", async () => {
  const log = recorder();
  let posts = 0;
  const app = new Hono();
  app.use("/api/*", idempotent({ scope: "global", onEvent: log.onEvent }));
  app.get("/api/items/:id", (c) => c.json({ id: c.req.param("id") }));
  app.post("/api/items", (c) => c.json({ n: ++posts }, 201));
  for (let i = 0; i < 2; i++) {
    const got = await app.request("/api/items/7", {
      headers: { "idempotency-key": "get" },
    });
    assert.equal(got.status, 200);
    assert.equal(got.headers.get("idempotent-replayed"), null);
    assert.deepEqual(await got.json(), { id: "7" });
  }
  await pay(app, null, "{}", "/api/items");
  await pay(app, null, "{}", "/api/items");
  assert.equal(posts, 2);
  assert.deepEqual(log.events, [], "no store call at all");
});

Deno.test("idempotent() under Deno.serve(app.fetch) replays over the wire", async () => {
  let runs = 0;
  const app = new Hono();
  const optIn = { scope: "global", storeSetCookie: true } as const;
  app.post("/payments", idempotent(optIn), async (c) => {
    runs++;
    const { amount } = await c.req.json();
    setCookie(c, "a", "1");
    setCookie(c, "b", "2");
    return c.json({ amount, runs }, 201);
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    app.fetch,
  );
  try {
    const { port } = server.addr as Deno.NetAddr;
    const send = () =>
      fetch(`http://127.0.0.1:${port}/payments`, {
        method: "POST",
        headers: {
          "idempotency-key": "wire",
          "content-type": "application/json",
        },
        body: JSON.stringify({ amount: 7 }),
      });
    const first = await send();
    const firstBytes = await bytes(first);
    const replay = await send();
    assert.equal(replay.status, 201);
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(replay.headers.getSetCookie(), [
      "a=1; Path=/",
      "b=2; Path=/",
    ]);
    assert.ok(sameBytes(await bytes(replay), firstBytes));
    assert.deepEqual(JSON.parse(new TextDecoder().decode(firstBytes)), {
      amount: 7,
      runs: 1,
    });
    assert.equal(runs, 1);
  } finally {
    await server.shutdown();
  }
});

Deno.test("idempotent() keeps a problem's own Cache-Control and Retry-After over earlier middleware's", async () => {
  const app = new Hono();
  app.use("*", async (c, next) => {
    c.header("cache-control", "public, max-age=600");
    c.header("retry-after", "999");
    await next();
  });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  let entered!: () => void;
  const running = new Promise<void>((resolve) => entered = resolve);
  app.post("/payments", idempotent({ scope: "global" }), async (c) => {
    entered();
    await gate;
    return c.json({ ok: true }, 201);
  });
  const first = pay(app, "cache", "{}", "/payments");
  await running; // the first request holds the key
  const busy = await pay(app, "cache", "{}", "/payments");
  assert.equal(busy.status, 409);
  assert.equal(
    busy.headers.get("cache-control"),
    "no-store",
    "a problem is never cached",
  );
  assert.notEqual(busy.headers.get("retry-after"), "999");
  release();
  assert.equal((await first).status, 201);
});

Deno.test("idempotent() lets earlier middleware's Cache-Control and Retry-After over a replay, never its Content-Type or Content-Length", async () => {
  const app = new Hono();
  app.use("*", async (c, next) => {
    c.header("cache-control", "public, max-age=600");
    c.header("retry-after", "999");
    c.header("content-type", "text/html");
    c.header("content-length", "1");
    await next();
  });
  app.post("/payments", idempotent({ scope: "global" }), (c) => {
    c.header("cache-control", "private");
    return c.json({ ok: true }, 201);
  });
  const first = await pay(app, "own", "{}");
  assert.equal(first.status, 201);
  const body = await first.text();

  const replay = await pay(app, "own", "{}");
  assert.equal(replay.status, 201);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.equal(replay.headers.get("cache-control"), "public, max-age=600");
  assert.equal(replay.headers.get("retry-after"), "999");
  assert.equal(replay.headers.get("content-type"), "application/json");
  assert.equal(replay.headers.get("content-length"), null, "not the 1 above");
  assert.equal(await replay.text(), body);

  const reused = await pay(app, "own", '{"x":1}');
  assert.equal(reused.status, 422);
  assert.equal(reused.headers.get("cache-control"), "no-store");
  assert.equal(reused.headers.get("retry-after"), null);
  assert.equal(reused.headers.get("content-type"), "application/problem+json");
  const problem = await reused.text();
  assert.equal(reused.headers.get("content-length"), null, "not the 1 above");
  assert.equal(JSON.parse(problem).type, PROBLEM_TYPES.reused);
});
