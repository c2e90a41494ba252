// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The mutation runner: `deno task mutate`.
 *
 * Copies the repository to a scratch directory once, then for each mutant of
 * `mutants.ts` writes the mutated file into the copy, runs the test files the
 * mutant names there, and puts the file back. A mutant is caught when those
 * tests fail, survived when they pass. The repository itself is never
 * written to, so an interrupted run leaves no mutant in `src/`.
 *
 * Before any mutant, every mutant's text is checked to occur exactly once in
 * its file (code moves; a stale mutant is reported, with its file and text,
 * and counts as an error), and the named test files are run once unmutated:
 * a suite that fails as it stands would make every mutant look caught.
 *
 * Usage: `deno task mutate [--only=id,id] [--module=path] [--list] [--keep]`.
 * `--module` keeps the mutants of one file (`src/_guard.ts`); `--list` prints
 * the chosen mutants grouped by file. The score is reported per mutated file,
 * weakest first, then in total. The integration tests are required
 * (`IDEMPOTENCY_REQUIRE_SERVICES=1`), so Redis and PostgreSQL must be up.
 * Exits 0 only when every mutant is caught.
 *
 * @module
 */

// deno-lint-ignore-file no-console

import { type Mutant, MUTANTS } from "./mutants.ts";

const ROOT = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
/** Not copied: version control, caches, installed tools. */
const SKIP = new Set([".git", "node_modules", ".ci/.tools", "coverage"]);
/** Longer than this, a mutant's run is stopped and counted as caught (a hang). */
const TIMEOUT_MS = 300_000;
const TEST_FLAGS = [
  "test",
  "--allow-net",
  "--allow-env",
  "--allow-read",
  "--allow-write",
  "--allow-run",
  "--unstable-kv",
];

/** The test run in progress, stopped with the runner on a signal. */
let running: Deno.ChildProcess | undefined;

/** What one mutant's run showed; a timeout counts as caught (a hang). */
export type Verdict = "caught" | "survived" | "timeout" | "invalid";

interface Outcome {
  mutant: Mutant;
  verdict: Verdict;
  ms: number;
  detail: string;
}

/** One mutated file's score: `caught` of `total` scored mutants. */
export interface ModuleScore {
  file: string;
  caught: number;
  /** Caught plus survived; invalid mutants are counted apart. */
  total: number;
  invalid: number;
}

/**
 * The score of each mutated file, weakest first (lowest caught share, then
 * most survivors, then by name); a file with nothing scored sorts first.
 */
export function scoreByModule(
  outcomes: readonly { mutant: { file: string }; verdict: Verdict }[],
): ModuleScore[] {
  const scores = new Map<string, ModuleScore>();
  for (const { mutant, verdict } of outcomes) {
    let score = scores.get(mutant.file);
    if (score === undefined) {
      score = { file: mutant.file, caught: 0, total: 0, invalid: 0 };
      scores.set(mutant.file, score);
    }
    if (verdict === "invalid") {
      score.invalid++;
    } else {
      score.total++;
      if (verdict !== "survived") score.caught++;
    }
  }
  return [...scores.values()].sort((a, b) =>
    share(a) - share(b) ||
    (b.total - b.caught) - (a.total - a.caught) ||
    (a.file < b.file ? -1 : a.file > b.file ? 1 : 0)
  );
}

/** The per-file lines of the report, as `scoreByModule` sorts them. */
export function formatScores(scores: readonly ModuleScore[]): string[] {
  const width = Math.max(0, ...scores.map((s) => s.file.length));
  return scores.map((s) =>
    `  ${s.file.padEnd(width)}  ${`${s.caught}/${s.total}`.padStart(7)}  ${
      percent(s.caught, s.total).padStart(4)
    }${s.invalid ? `, ${s.invalid} invalid` : ""}`
  );
}

/** The mutants listed by file, in file order, each file with its count. */
export function listByModule(mutants: readonly Mutant[]): string[] {
  const files = [...new Set(mutants.map((m) => m.file))].sort();
  return files.flatMap((file) => {
    const own = mutants.filter((m) => m.file === file);
    return [
      `${file} (${own.length})`,
      ...own.map((m) => `  ${m.id}\t${m.what}`),
    ];
  });
}

/**
 * The mutants `--only=` and `--module=` choose, or the reason they choose
 * none that exist.
 */
export function choose(
  mutants: readonly Mutant[],
  args: readonly string[],
): Mutant[] | string {
  const only = args.find((a) => a.startsWith("--only="))?.slice(7).split(",");
  const module = args.find((a) => a.startsWith("--module="))?.slice(9)
    .replace(/^\.\//, "");
  let chosen = only ? mutants.filter((m) => only.includes(m.id)) : [...mutants];
  if (only && chosen.length !== only.length) {
    const known = new Set(mutants.map((m) => m.id));
    return `Unknown mutant id(s): ${
      only.filter((id) => !known.has(id)).join(", ")
    }`;
  }
  if (module !== undefined) {
    if (!mutants.some((m) => m.file === module)) {
      return `No mutants for module ${module}; the mutated files are:\n  ${
        [...new Set(mutants.map((m) => m.file))].sort().join("\n  ")
      }`;
    }
    chosen = chosen.filter((m) => m.file === module);
  }
  return chosen;
}

function share(score: ModuleScore): number {
  return score.total === 0 ? -1 : score.caught / score.total;
}

function percent(caught: number, total: number): string {
  return `${total ? Math.floor(100 * caught / total) : 0}%`;
}

/** What `--help` prints. */
export const USAGE =
  "Usage: deno task mutate [--only=id,id] [--module=path] [--list] [--keep]\n" +
  "  --only=id,id   run these mutants\n" +
  "  --module=path  run the mutants of one file (src/_guard.ts)\n" +
  "  --list         list the mutants by file, run nothing\n" +
  "  --keep         keep the scratch copy\n" +
  "Without --only or --module, every mutant runs (a long run).";

async function main(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    return 0;
  }
  const unknown = args.filter((a) =>
    !/^--(only|module)=/.test(a) && a !== "--list" && a !== "--keep"
  );
  if (unknown.length > 0) {
    console.error(`Unknown argument(s): ${unknown.join(" ")}\n${USAGE}`);
    return 2;
  }
  const chosen = choose(MUTANTS, args);
  if (typeof chosen === "string") {
    console.error(chosen);
    return 2;
  }
  if (args.includes("--list")) {
    for (const line of listByModule(chosen)) console.log(line);
    return 0;
  }

  const duplicates = chosen.map((m) => m.id).filter((id, i, all) =>
    all.indexOf(id) !== i
  );
  if (duplicates.length > 0) {
    console.error(`Duplicate mutant ids: ${duplicates.join(", ")}`);
    return 2;
  }

  // Stale mutants: each text must occur exactly once in its file.
  const stale: string[] = [];
  const sources = new Map<string, string>();
  for (const m of chosen) {
    let source = sources.get(m.file);
    if (source === undefined) {
      try {
        source = await Deno.readTextFile(`${ROOT}/${m.file}`);
      } catch {
        stale.push(`${m.id}: ${m.file}: file not found`);
        continue;
      }
      sources.set(m.file, source);
    }
    const count = occurrences(source, m.text);
    if (count !== 1) {
      stale.push(
        `${m.id}: ${m.file}: text ${
          count === 0 ? "not found" : `found ${count} times (must be once)`
        }:\n    ${m.text.replaceAll("\n", "\n    ")}`,
      );
    }
    for (const test of m.tests) {
      try {
        await Deno.stat(`${ROOT}/${test}`);
      } catch {
        stale.push(`${m.id}: test file not found: ${test}`);
      }
    }
  }
  if (stale.length > 0) {
    console.error(
      `Stale mutants (the code moved; update tests/mutation/mutants.ts):\n  ${
        stale.join("\n  ")
      }`,
    );
  }
  const runnable = chosen.filter((m) =>
    !stale.some((s) => s.startsWith(`${m.id}:`))
  );

  const scratch = await Deno.makeTempDir({ prefix: "idempotency_mutate_" });
  const cleanup = () => {
    if (!args.includes("--keep")) {
      try {
        Deno.removeSync(scratch, { recursive: true });
      } catch { /* already gone */ }
    }
  };
  const onSignal = () => {
    try {
      running?.kill("SIGKILL");
    } catch { /* exited meanwhile */ }
    cleanup();
    Deno.exit(130);
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  const outcomes: Outcome[] = [];
  const started = performance.now();
  let baselineMs = 0;
  try {
    await copyTree(ROOT, scratch, "");
    console.log(`Scratch copy: ${scratch}`);

    const allTests = [...new Set(runnable.flatMap((m) => m.tests))].sort();
    const base = await runTests(scratch, allTests);
    baselineMs = base.ms;
    if (base.code !== 0) {
      console.error(
        `The named test files fail without any mutant, so no verdict would mean anything:\n${
          tail(base.output, 40)
        }`,
      );
      return 2;
    }
    console.log(
      `Baseline: ${allTests.length} test files pass unmutated in ${
        seconds(base.ms)
      }.\n`,
    );

    const idWidth = Math.max(34, ...runnable.map((m) => m.id.length));
    for (const m of runnable) {
      const original = sources.get(m.file)!;
      const path = `${scratch}/${m.file}`;
      await Deno.writeTextFile(
        path,
        original.replace(m.text, () => m.replacement),
      );
      let outcome: Outcome;
      try {
        const run = await runTests(scratch, m.tests);
        outcome = judge(m, run);
      } finally {
        await Deno.writeTextFile(path, original);
      }
      outcomes.push(outcome);
      console.log(
        `${outcome.verdict.padEnd(8)} ${m.id.padEnd(idWidth)} ${
          seconds(outcome.ms).padStart(7)
        }  ${m.what}${outcome.detail ? `\n         ${outcome.detail}` : ""}`,
      );
    }
  } finally {
    cleanup();
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }

  const total = performance.now() - started;
  const caught = outcomes.filter((o) =>
    o.verdict === "caught" || o.verdict === "timeout"
  );
  const survived = outcomes.filter((o) => o.verdict === "survived");
  const invalid = outcomes.filter((o) => o.verdict === "invalid");
  const scored = caught.length + survived.length;
  console.log(`\nBy module, weakest first:`);
  for (const line of formatScores(scoreByModule(outcomes))) console.log(line);
  console.log(
    `\nScore: ${caught.length}/${scored} caught (${
      percent(caught.length, scored)
    }), ${survived.length} survived, ${invalid.length} invalid (do not type-check), ${stale.length} stale.`,
  );
  console.log(
    `Time: ${seconds(total)} in all, ${
      (total / Math.max(1, baselineMs)).toFixed(1)
    }x one unmutated run of the named test files (${seconds(baselineMs)}).`,
  );
  if (survived.length > 0) {
    console.log(`Survivors: ${survived.map((o) => o.mutant.id).join(", ")}`);
  }
  return survived.length + invalid.length + stale.length === 0 ? 0 : 1;
}

function judge(
  mutant: Mutant,
  run: { code: number; output: string; ms: number; timedOut: boolean },
): Outcome {
  if (run.timedOut) {
    return { mutant, verdict: "timeout", ms: run.ms, detail: "" };
  }
  if (run.code === 0) {
    return { mutant, verdict: "survived", ms: run.ms, detail: "" };
  }
  if (/Type checking failed|error: Module not found/.test(run.output)) {
    return {
      mutant,
      verdict: "invalid",
      ms: run.ms,
      detail: firstMatch(run.output, /TS\d+.*$/m) ??
        "the mutated file does not type-check",
    };
  }
  const failed = firstMatch(run.output, /^\s*(.+?) \.\.\. FAILED/m)?.trim()
    .replace(/ \.\.\. FAILED.*$/, "");
  return {
    mutant,
    verdict: "caught",
    ms: run.ms,
    detail: failed ? `by: ${clip(failed, 110)}` : "",
  };
}

async function runTests(
  cwd: string,
  tests: string[],
): Promise<{ code: number; output: string; ms: number; timedOut: boolean }> {
  const started = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: [...TEST_FLAGS, ...tests],
    cwd,
    env: { IDEMPOTENCY_REQUIRE_SERVICES: "1", NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  running = child;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch { /* exited meanwhile */ }
  }, TIMEOUT_MS);
  const { code, stdout, stderr } = await child.output();
  clearTimeout(timer);
  running = undefined;
  const decoder = new TextDecoder();
  return {
    code,
    output: decoder.decode(stdout) + decoder.decode(stderr),
    ms: performance.now() - started,
    timedOut,
  };
}

async function copyTree(from: string, to: string, rel: string): Promise<void> {
  for await (const entry of Deno.readDir(`${from}/${rel}`)) {
    const path = rel ? `${rel}/${entry.name}` : entry.name;
    if (SKIP.has(path) || SKIP.has(entry.name)) continue;
    if (entry.isDirectory) {
      await Deno.mkdir(`${to}/${path}`, { recursive: true });
      await copyTree(from, to, path);
    } else if (entry.isFile) {
      await Deno.copyFile(`${from}/${path}`, `${to}/${path}`);
    }
  }
}

function occurrences(source: string, text: string): number {
  if (text.length === 0) return 0;
  let count = 0;
  for (
    let i = source.indexOf(text);
    i !== -1;
    i = source.indexOf(text, i + 1)
  ) {
    count++;
  }
  return count;
}

function firstMatch(text: string, pattern: RegExp): string | undefined {
  return text.match(pattern)?.[0];
}

function clip(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

function tail(text: string, lines: number): string {
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
