// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * Fails when the package outgrows its budgets: `deno task check` runs it.
 *
 * - every `.ts` file under `src/` (and `mod.ts`) at most 500 lines;
 * - README.md at most 16 KiB (16,384 bytes): what does not fit goes to
 *   `docs/` (the operator's detail is `docs/operations.md`).
 *
 * A budget is raised only in the commit that says why. Before it looks at the
 * package it checks itself: it writes a tree holding each budget's n−1, n and
 * n+1 into a temporary directory and fails unless exactly the n+1 cases are
 * reported, so a slip here cannot make it pass without looking.
 *
 * @module
 */

/** The budgets, in one place. */
export const BUDGETS = { srcFileLines: 500, readmeBytes: 16 * 1024 } as const;

/** The files below `dir` (relative paths), recursively, that `keep` accepts. */
async function filesOf(
  root: string,
  dir: string,
  keep: (path: string) => boolean,
): Promise<string[]> {
  const found: string[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(`${root}/${dir}`));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return found;
    throw error;
  }
  for (const entry of entries) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) found.push(...await filesOf(root, path, keep));
    else if (entry.isFile && keep(path)) found.push(path);
  }
  return found.sort();
}

/** Lines of a text as an editor counts them (a final newline ends the last). */
function lineCount(text: string): number {
  if (text === "") return 0;
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

/** What breaks a budget in the tree at `root`, one line each. */
export async function breaches(root: string): Promise<string[]> {
  const found: string[] = [];
  const sources = await filesOf(root, "src", (p) => p.endsWith(".ts"));
  for (const path of ["mod.ts", ...sources]) {
    let text: string;
    try {
      text = await Deno.readTextFile(`${root}/${path}`);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      throw error;
    }
    const lines = lineCount(text);
    if (lines > BUDGETS.srcFileLines) {
      found.push(
        `${path}: ${lines} lines, over the ${BUDGETS.srcFileLines} a source file may have: split it by concern or simplify`,
      );
    }
  }
  const readme = await Deno.readFile(`${root}/README.md`).catch(() => null);
  if (readme !== null && readme.byteLength > BUDGETS.readmeBytes) {
    found.push(
      `README.md: ${readme.byteLength} bytes, over its ${BUDGETS.readmeBytes}: move detail to docs/ (the operator's to docs/operations.md)`,
    );
  }
  return found;
}

/** Checks `breaches()` on a tree at each budget's n−1, n and n+1. */
async function selfTest(): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "budgets_" });
  try {
    await Deno.mkdir(`${dir}/src/room`, { recursive: true });
    const lines = (n: number) => "x\n".repeat(n);
    const n = BUDGETS.srcFileLines;
    await Deno.writeTextFile(`${dir}/src/under.ts`, lines(n - 1));
    await Deno.writeTextFile(`${dir}/src/room/at.ts`, lines(n));
    await Deno.writeTextFile(`${dir}/src/room/over.ts`, lines(n + 1));
    await Deno.writeTextFile(`${dir}/src/over.md`, lines(n + 1)); // not code
    await Deno.writeTextFile(
      `${dir}/README.md`,
      "r".repeat(BUDGETS.readmeBytes),
    );
    const atReadme = await breaches(dir);
    await Deno.writeTextFile(
      `${dir}/README.md`,
      "r".repeat(BUDGETS.readmeBytes + 1),
    );
    const overReadme = await breaches(dir);
    const expected = [`src/room/over.ts: ${n + 1} lines`];
    const ok = atReadme.length === 1 && atReadme[0]!.startsWith(expected[0]!) &&
      overReadme.length === 2 &&
      overReadme[1]!.startsWith(`README.md: ${BUDGETS.readmeBytes + 1} bytes`);
    if (!ok) {
      throw new Error(
        `budgets self-test: expected only the n+1 cases, got ${
          JSON.stringify([atReadme, overReadme])
        }`,
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  await selfTest();
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  const found = await breaches(root);
  if (found.length > 0) {
    console.error(`Over budget:\n${found.map((l) => `  ${l}`).join("\n")}`);
    Deno.exit(1);
  }
  console.log("Budgets hold: source files ≤ 500 lines, README.md ≤ 16 KiB.");
}
