// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The `renderProblem` option's status rules (docs/architecture.md,
 * Problems), through `idempotency()`: a renderer's own 4xx or 5xx survives
 * with its status text, at the range's edges (399, 400, 599); any other
 * status (2xx, 3xx) becomes the problem's, with no status text, whether or
 * not the renderer's answer lacked a header. The first file is
 * tests/problem_renderer_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency, MemoryStore, type ProblemRenderer } from "../mod.ts";
import { post } from "./_support/http.ts";

/** The answer to a malformed key (a 400 problem) under `renderProblem`. */
async function malformed(renderProblem: ProblemRenderer): Promise<Response> {
  const handler = idempotency(() => new Response("ran"), {
    scope: "global",
    store: new MemoryStore(),
    renderProblem,
    logger: false,
  });
  return await handler(post("a key with spaces"));
}

/** The answer to a key reused for another body (a 422 problem). */
async function mismatch(renderProblem: ProblemRenderer): Promise<Response> {
  const handler = idempotency(() => new Response("ran"), {
    scope: "global",
    store: new MemoryStore(),
    renderProblem,
    logger: false,
  });
  await (await handler(post("k", "one"))).text();
  return await handler(post("k", "two"));
}

Deno.test("renderProblem: a status of the renderer's own survives from 400 to 599 with its status text; 399 and below become the problem's, without it", async () => {
  const cases: [status: number, kept: boolean][] = [
    [200, false],
    [201, false],
    [204, false],
    [299, false],
    [304, false],
    [399, false],
    [400, true],
    [401, true],
    [499, true],
    [500, true],
    [503, true],
    [599, true],
  ];
  for (const [status, kept] of cases) {
    for (const complete of [false, true]) {
      // `complete`: the renderer already sends every header of the problem's.
      const headers: Record<string, string> = complete
        ? { "cache-control": "no-store" }
        : {};
      const statusText = `Own ${status}`;
      const body = status === 204 || status === 304 ? null : "{}";
      for (const answer of [malformed, mismatch]) {
        const response = await answer(() =>
          new Response(body, { status, statusText, headers })
        );
        const problem = answer === malformed ? 400 : 422;
        const what =
          `${status} (headers complete: ${complete}) for a ${problem}`;
        assert.equal(response.status, kept ? status : problem, what);
        assert.equal(response.statusText, kept ? statusText : "", what);
        assert.equal(response.headers.get("cache-control"), "no-store", what);
        assert.equal(response.headers.get("retry-after"), null, what);
        await response.body?.cancel();
      }
    }
  }
});

Deno.test("renderProblem: a re-statused answer keeps the renderer's body and headers", async () => {
  const response = await mismatch(() =>
    new Response('{"error":"reused"}', {
      status: 201,
      statusText: "Created",
      headers: { "content-type": "application/json", "x-request-id": "r1" },
    })
  );
  assert.equal(response.status, 422);
  assert.equal(response.statusText, "");
  assert.equal(response.headers.get("content-type"), "application/json");
  assert.equal(response.headers.get("x-request-id"), "r1");
  assert.equal(await response.text(), '{"error":"reused"}');
});
