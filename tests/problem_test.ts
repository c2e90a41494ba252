// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The problem `type` URIs are public API: their values are pinned here, and
 * each one's fragment must name a place in README.md (an explicit anchor or
 * a heading's id), so that editing the README cannot leave one dangling.
 * `renderProblem` is in `tests/problem_renderer_test.ts`, and with the Stripe
 * SDK in `tests/problem_renderer_stripe_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PROBLEM_TYPES } from "../mod.ts";

const README = new URL("../README.md", import.meta.url);

/** The ids a Markdown renderer gives a page: explicit anchors and heading slugs. */
function idsOf(markdown: string): Set<string> {
  const ids = new Set<string>();
  for (const [, id] of markdown.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) {
    ids.add(id!);
  }
  for (const [, heading] of markdown.matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    ids.add(
      heading!.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "")
        .replace(/\s/g, "-"),
    );
  }
  return ids;
}

Deno.test("PROBLEM_TYPES keeps its published URIs", () => {
  const base = "https://jsr.io/@idempotent/http#";
  assert.deepEqual({ ...PROBLEM_TYPES }, {
    missing: `${base}problem-key-missing`,
    malformed: `${base}problem-key-malformed`,
    inFlight: `${base}problem-key-in-flight`,
    tooLarge: `${base}problem-request-too-large`,
    incomplete: `${base}problem-request-incomplete`,
    reused: `${base}problem-key-reused`,
    unavailable: `${base}problem-store-unavailable`,
    unreadable: `${base}problem-record-unreadable`,
    misconfigured: `${base}problem-misconfigured`,
  });
});

Deno.test("PROBLEM_TYPES: every URI's fragment is an anchor or a heading in README.md", async () => {
  const ids = idsOf(await Deno.readTextFile(README));
  for (const [name, uri] of Object.entries(PROBLEM_TYPES)) {
    const fragment = new URL(uri).hash.slice(1);
    assert.ok(fragment.length > 0, `${name}: ${uri} has no fragment`);
    assert.ok(
      ids.has(fragment),
      `${name}: README.md has no anchor or heading "${fragment}" (${uri})`,
    );
  }
});
