// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `renderProblem`: every problem the middleware answers, rendered in an
 * application's own error format (Stripe's `{"error":{…}}` here), keeps its
 * status and `Retry-After` unless the renderer changes them on purpose; a
 * renderer that fails gives the RFC 9457 problem; Hono keeps a rendered
 * problem's headers. The official Stripe SDK against such an endpoint is in
 * `tests/problem_renderer_stripe_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Hono } from "hono";
import {
  idempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
  PROBLEM_TYPES,
  type ProblemCode,
  type ProblemRenderer,
  type ProblemToRender,
  type ProblemTypes,
} from "../mod.ts";
import { idempotent } from "../src/hono.ts";
import type { UnitOfWork } from "../src/store.ts";
import { MemoryStore } from "../src/stores/memory.ts";
import { FaultyStore } from "./faults/_faulty_store.ts";
import { post } from "./_support/http.ts";
import { deferred } from "./_support/time.ts";
import { UnreadableStore } from "./_support/stores.ts";
import { stripeShaped } from "./_problem_fixtures.ts";

/** The handler's transaction does not commit: its claim was lost, or the commit threw. */
class UncommittedStore extends MemoryStore {
  constructor(readonly commit: "lost" | "throws") {
    super();
  }
  unitOfWork(): UnitOfWork {
    const outcome = this.commit;
    return {
      opened: true,
      commit: () =>
        outcome === "lost"
          ? Promise.resolve("lost")
          : Promise.reject(new Error("connection reset")),
      rollback: () => Promise.resolve(),
    };
  }
}

type Options = Partial<IdempotencyOptions>;

/** One way to a problem: the options and the request that draw it. */
interface Case {
  name: string;
  status: number;
  retryAfter: string | null;
  options?: () => Options;
  /** Sent on a middleware whose handler holds the key `held` until `release`. */
  request: () => Request;
}

function down(): FaultyStore {
  const store = new FaultyStore(new MemoryStore());
  store.failing.add("claim");
  return store;
}
const cut = () =>
  new Request("http://api.test/payments", {
    method: "POST",
    headers: { "idempotency-key": "cut" },
    body: new ReadableStream({
      pull: (controller) => controller.error(new Error("cut")),
    }),
  });

/** Every problem type (the compiler asks for each), by each way to it. */
const CASES: Record<keyof ProblemTypes, Case[]> = {
  missing: [{
    name: "no key, required",
    status: 400,
    retryAfter: null,
    options: () => ({ required: true }),
    request: () => post(null),
  }],
  malformed: [{
    name: "malformed key",
    status: 400,
    retryAfter: null,
    request: () => post("a b"),
  }],
  tooLarge: [{
    name: "body over maxRequestBytes",
    status: 413,
    retryAfter: null,
    request: () => post("big", "x".repeat(101)),
  }],
  incomplete: [{
    name: "body broke off",
    status: 400,
    retryAfter: null,
    request: cut,
  }],
  reused: [{
    name: "key reused for another body",
    status: 422,
    retryAfter: null,
    request: () => post("held", '{"other":1}'),
  }],
  inFlight: [
    {
      name: "key in flight",
      status: 409,
      retryAfter: "1",
      request: () => post("held"),
    },
    {
      name: "transaction lost its claim",
      status: 409,
      retryAfter: "1",
      options: () => ({ store: new UncommittedStore("lost") }),
      request: () => post("lost"),
    },
  ],
  unreadable: [{
    name: "record unreadable",
    status: 500,
    retryAfter: null,
    options: () => ({ store: new UnreadableStore() }),
    request: () => post("u"),
  }],
  misconfigured: [{
    name: "a ttl function that throws",
    status: 500,
    retryAfter: null,
    options: () => ({
      ttl: () => {
        throw new Error("no route");
      },
      logger: false,
    }),
    request: () => post("t"),
  }],
  unavailable: [
    {
      name: "store unreachable",
      status: 503,
      retryAfter: "1",
      options: () => ({ store: down() }),
      request: () => post("down"),
    },
    {
      name: "transaction commit failed",
      status: 503,
      retryAfter: "1",
      options: () => ({ store: new UncommittedStore("throws") }),
      request: () => post("failed"),
    },
  ],
};

/** Runs every case through `options`, with the key `held` in flight on its store. */
async function answers(
  options: Options,
): Promise<{ kind: keyof ProblemTypes; name: string; response: Response }[]> {
  const gate = deferred();
  const started = deferred();
  const store = new MemoryStore();
  const handler = async (request: Request) => {
    if (request.headers.get("idempotency-key") === "held") {
      started.resolve();
      await gate.promise;
    }
    return new Response("ok", { status: 201 });
  };
  const guard = (more: Options = {}) =>
    idempotency(handler, {
      scope: "global",
      store,
      maxRequestBytes: 100,
      ...options,
      ...more,
    });
  const held = guard()(post("held"));
  await started.promise;
  const out = [];
  for (const [kind, cases] of Object.entries(CASES)) {
    for (const { name, options, request } of cases) {
      const response = await guard(options?.())(request());
      out.push({ kind: kind as keyof ProblemTypes, name, response });
    }
  }
  gate.resolve();
  assert.equal((await held).status, 201);
  return out;
}

Deno.test("renderProblem renders every problem type Stripe-shaped, its status and Retry-After kept", async () => {
  const seen: ProblemToRender[] = [];
  const rendered = await answers({
    renderProblem: (problem) => {
      seen.push(problem);
      return stripeShaped(problem);
    },
  });
  const standard = await answers({});
  const cases = Object.values(CASES).flat();
  assert.equal(rendered.length, cases.length);
  for (const [i, { kind, name, response }] of rendered.entries()) {
    const { status, retryAfter } = cases[i]!;
    const rfc = standard[i]!.response;
    assert.equal(response.status, status, name);
    assert.equal(rfc.status, status, name);
    assert.equal(response.headers.get("retry-after"), retryAfter, name);
    assert.equal(rfc.headers.get("retry-after"), retryAfter, name);
    assert.equal(response.headers.get("cache-control"), "no-store", name);
    assert.equal(response.headers.get("content-type"), "application/json");
    const { error } = await response.json();
    const problem = await rfc.json();
    assert.equal(error.doc_url, PROBLEM_TYPES[kind], name);
    assert.equal(error.message, problem.detail, name);
    // What the renderer got: the problem's fields, the request, its init.
    const given = seen[i]!;
    assert.deepEqual(
      {
        type: given.type,
        title: given.title,
        status: given.status,
        detail: given.detail,
        instance: given.instance,
        code: given.code,
        retryable: given.retryable,
      },
      problem,
      name,
    );
    assert.equal(given.retryAfter ?? null, retryAfter && Number(retryAfter));
    assert.equal(given.init.status, status, name);
    assert.equal(
      given.request.headers.has("idempotency-key"),
      kind !== "missing",
    );
  }
  const kinds = new Set(rendered.map(({ kind }) => kind));
  assert.deepEqual([...kinds].sort(), Object.keys(PROBLEM_TYPES).sort());
});

/** Each problem's machine code and whether a retry as sent can help (docs/problems.md). */
const CODES: Record<keyof ProblemTypes, [ProblemCode, boolean]> = {
  missing: ["idempotency_key_missing", false],
  malformed: ["idempotency_key_invalid", false],
  tooLarge: ["idempotency_request_too_large", false],
  incomplete: ["idempotency_request_incomplete", true],
  reused: ["idempotency_conflict", false],
  inFlight: ["idempotency_in_flight", true],
  unreadable: ["idempotency_record_unreadable", false],
  unavailable: ["idempotency_unavailable", true],
  misconfigured: ["idempotency_misconfigured", false],
};

Deno.test("every problem body carries its own code and retryable, which agrees with its status and Retry-After", async () => {
  const cases = Object.values(CASES).flat();
  const seen = new Map<string, string>();
  for (const [i, { kind, name, response }] of (await answers({})).entries()) {
    const body = await response.json();
    const [code, retryable] = CODES[kind];
    assert.equal(body.code, code, name);
    assert.equal(body.retryable, retryable, name);
    assert.equal(body.type, PROBLEM_TYPES[kind], name);
    assert.deepEqual(Object.keys(body), [
      "type",
      "title",
      "status",
      "detail",
      "instance",
      "code",
      "retryable",
    ]);
    // A Retry-After says when to retry; a broken body is retried at once.
    const { status, retryAfter } = cases[i]!;
    assert.equal(retryable, retryAfter !== null || kind === "incomplete", name);
    // What /client retries (409, 503) is retryable; 500 and the rest are not.
    if (status === 409 || status === 503) assert.ok(retryable, name);
    if (seen.has(code)) assert.equal(seen.get(code), kind, "one code a kind");
    seen.set(code, kind);
  }
  assert.equal(new Set(seen.keys()).size, Object.keys(PROBLEM_TYPES).length);
});

Deno.test("renderProblem's answer keeps another error status and its own Retry-After, and gets the problem's headers it lacks", async () => {
  const cases: [string, (p: ProblemToRender) => Response, number, string][] = [
    // Stripe answers a reused key 400: an error status of its own is kept.
    [
      "own status",
      (p) => Response.json({}, { ...p.init, status: 400 }),
      400,
      "no-store",
    ],
    [
      "own headers",
      (p) =>
        new Response("{}", {
          status: p.status,
          headers: { "cache-control": "private", "retry-after": "7" },
        }),
      409,
      "private",
    ],
    // `init` forgotten: 200 would tell the client it succeeded.
    ["no init", () => Response.json({ error: {} }), 409, "no-store"],
    [
      "a redirect",
      () => Response.redirect("http://api.test/", 302),
      409,
      "no-store",
    ],
  ];
  for (const [name, render, status, cacheControl] of cases) {
    const all = await answers({ renderProblem: render });
    const which = name === "own status"
      ? "key reused for another body"
      : "key in flight";
    const { response } = all.find((answer) => answer.name === which)!;
    assert.equal(response.status, status, name);
    assert.equal(response.headers.get("cache-control"), cacheControl, name);
    if (name !== "own status") {
      const retryAfter = name === "own headers" ? "7" : "1";
      assert.equal(response.headers.get("retry-after"), retryAfter, name);
    }
    await response.body?.cancel();
  }
});

Deno.test("renderProblem that throws, rejects or returns no Response gets the RFC 9457 problem, status and Retry-After kept", async () => {
  const renderers: [string, ProblemRenderer][] = [
    ["throws", () => {
      throw new Error("renderer bug");
    }],
    ["rejects", () => Promise.reject(new Error("renderer bug"))],
    ["returns an object", () => ({ error: {} }) as unknown as Response],
    ["returns nothing", () => undefined as unknown as Response],
  ];
  const cases = Object.values(CASES).flat();
  for (const [label, renderProblem] of renderers) {
    for (
      const [i, { name, response }] of (await answers({ renderProblem }))
        .entries()
    ) {
      const { status, retryAfter } = cases[i]!;
      assert.equal(response.status, status, `${label}: ${name}`);
      assert.equal(response.headers.get("retry-after"), retryAfter, name);
      assert.equal(
        response.headers.get("content-type"),
        "application/problem+json",
      );
      assert.equal((await response.json()).status, status, name);
    }
  }
});

Deno.test("renderProblem must be a function", () => {
  const options = { scope: "global", renderProblem: "stripe" } as const;
  assert.throws(
    () =>
      idempotency(
        () => new Response(),
        options as unknown as IdempotencyOptions,
      ),
    {
      name: "TypeError",
      message: "'renderProblem' must be a function: current value is stripe",
    },
  );
});

Deno.test("idempotent() keeps a rendered problem's headers over earlier middleware's, and lays the others, cookies added", async () => {
  const app = new Hono();
  app.use("*", async (c, next) => {
    c.header("content-type", "text/html");
    c.header("cache-control", "public, max-age=600");
    c.header("retry-after", "999");
    c.header("request-id", "req_from_earlier");
    c.header("x-frame-options", "DENY");
    c.header("set-cookie", "session=earlier");
    await next();
  });
  const gate = deferred();
  const started = deferred();
  app.post(
    "/v1/charges",
    idempotent({
      scope: "global",
      renderProblem: (problem) => {
        const response = stripeShaped(problem);
        response.headers.set("request-id", "req_problem");
        response.headers.set("set-cookie", "problem=1");
        return response;
      },
    }),
    async (c) => {
      started.resolve();
      await gate.promise;
      return c.json({ id: "ch_1" });
    },
  );
  const charge = (body: string) =>
    Promise.resolve(app.request("/v1/charges", {
      method: "POST",
      headers: { "idempotency-key": "k1" },
      body,
    }));
  const first = charge("amount=100");
  await started.promise;
  const busy = await charge("amount=100");
  assert.equal(busy.status, 409);
  assert.equal(busy.headers.get("content-type"), "application/json");
  assert.equal(busy.headers.get("cache-control"), "no-store");
  assert.equal(busy.headers.get("retry-after"), "1");
  assert.equal(busy.headers.get("request-id"), "req_problem");
  assert.equal(busy.headers.get("x-frame-options"), "DENY");
  assert.deepEqual(busy.headers.getSetCookie(), [
    "problem=1",
    "session=earlier",
  ]);
  assert.equal((await busy.json()).error.doc_url, PROBLEM_TYPES.inFlight);

  gate.resolve();
  assert.equal((await first).status, 200);
  const reused = await charge("amount=200");
  assert.equal(reused.status, 422);
  assert.equal(reused.headers.get("content-type"), "application/json");
  assert.equal(reused.headers.get("retry-after"), null, "not the 999 above");
  assert.equal((await reused.json()).error.type, "idempotency_error");
});

Deno.test("renderProblem's failure is a render_error event and, without onEvent, one logged line", async () => {
  const events: IdempotencyEvent[] = [];
  const lines: unknown[][] = [];
  const logger = {
    warn: (...data: unknown[]) => void lines.push(data),
    error: (...data: unknown[]) => void lines.push(data),
  };
  const failing = () => {
    throw new Error("renderer bug");
  };
  for (
    const options of [
      { onEvent: (event: IdempotencyEvent) => void events.push(event) },
      { logger },
    ]
  ) {
    const handler = idempotency(() => new Response("ok"), {
      scope: "global",
      renderProblem: failing,
      ...options,
    });
    const response = await handler(post("k 1")); // malformed: a 400
    assert.equal(response.status, 400);
    assert.equal(
      response.headers.get("content-type"),
      "application/problem+json",
    );
  }
  assert.deepEqual(events.map((e) => e.type), ["rejected", "render_error"]);
  assert.match(String((events[1] as { error: unknown }).error), /renderer bug/);
  assert.equal(lines.length, 1);
  assert.match(
    String(lines[0]![0]),
    /render_error: 'renderProblem' failed.*renderer bug/,
  );
});
