// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The design documents name only what exists: every repository path in a code
 * span of docs/architecture.md, docs/operations.md and CONTRIBUTING.md
 * (`src/…`, `tests/…`, `.ci/…`, `docs/…`, `bench/…`, `examples/…`) is a file
 * or folder of this checkout, and every `` `name()` `` that
 * docs/architecture.md gives with a file beside it is declared in that file.
 * A move or a rename that forgets the docs fails here.
 *
 * @module
 */
import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);
const DOCS = ["docs/architecture.md", "docs/operations.md", "CONTRIBUTING.md"];
const PATH =
  /(?:^|[\s(`"=])((?:src|tests|\.ci|docs|bench|examples)\/[\w./-]*)/g;

/** The repository paths a document's code spans name, with their lines. */
export function pathsOf(markdown: string): { path: string; line: number }[] {
  const found: { path: string; line: number }[] = [];
  for (const [i, line] of markdown.split("\n").entries()) {
    for (const span of line.matchAll(/`([^`]+)`/g)) {
      for (const m of span[1]!.matchAll(PATH)) {
        const path = m[1]!.replace(/[.,:;]+$/, "");
        // A pattern (`tests/<file>_test.ts`) or a placeholder is no path.
        if (/[<>*]/.test(span[1]!) || path.includes("$")) continue;
        found.push({ path, line: i + 1 });
      }
    }
  }
  return found;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(new URL(path, ROOT));
    return true;
  } catch {
    return false;
  }
}

Deno.test("pathsOf() finds paths in code spans, not patterns", () => {
  assert.deepEqual(
    pathsOf(
      "see `src/_guard.ts` and `tests/<file>_test.ts`, `.ci/run`.\nno src/x.ts",
    ),
    [{ path: "src/_guard.ts", line: 1 }, { path: ".ci/run", line: 1 }],
  );
});

Deno.test("every path the design documents name exists", async () => {
  const missing: string[] = [];
  let seen = 0;
  for (const doc of DOCS) {
    const text = await Deno.readTextFile(new URL(doc, ROOT));
    for (const { path, line } of pathsOf(text)) {
      seen++;
      // `.ci/.tools` is made by the first run, not kept in the repository.
      if (path.startsWith(".ci/.tools")) continue;
      // A room is named by its files' common stem (`src/stores/_shared`).
      if (!await exists(path) && !await exists(`${path}.ts`)) {
        missing.push(`${doc}:${line}: ${path}`);
      }
    }
  }
  assert.ok(seen > 50, `only ${seen} paths found: is the pattern right?`);
  assert.deepEqual(missing, []);
});

Deno.test("every function docs/architecture.md names beside its file is declared there", async () => {
  const text = await Deno.readTextFile(new URL("docs/architecture.md", ROOT));
  const missing: string[] = [];
  let seen = 0;
  // "`name()` (`src/file.ts`)" and "`name()`, `src/file.ts`" forms.
  const pair = /`([A-Za-z_$][\w$]*)\(\)`[^`\n]{0,12}`((?:src)\/[\w./-]+\.ts)`/g;
  for (const m of text.replace(/\n\s*/g, " ").matchAll(pair)) {
    const [, name, file] = m;
    seen++;
    const source = await Deno.readTextFile(new URL(file!, ROOT)).catch(() =>
      ""
    );
    const declared = new RegExp(
      `(function\\*?\\s+${name}\\b|\\b${name}\\s*[(=:<]|\\b(get|async|static)\\s+${name}\\b)`,
    );
    if (!declared.test(source)) missing.push(`${name}() in ${file}`);
  }
  assert.ok(seen >= 3, `only ${seen} functions found beside a file`);
  assert.deepEqual(missing, []);
});
