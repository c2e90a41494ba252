// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * Fails when the package outgrows its budgets: `deno task check` runs it.
 *
 * - every `.ts` file under `src/` (and `mod.ts`) at most 500 lines;
 * - README.md at most 16 KiB (16,384 bytes): what does not fit goes to
 *   `docs/` (the operator's detail is `docs/operations.md`);
 * - every room (docs/architecture.md, Layout) within its line budget
 *   ({@linkcode ROOM_LINES}; {@linkcode roomOf} says which room a file is in);
 * - no file imports another room's private (`_`) file, except the kernel's
 *   ({@linkcode KERNEL}), `src/stores/_shared` room's and the pairs
 *   {@linkcode CROSS_ROOM} lists with their reason;
 * - no export of a private file is imported by tests (or benchmarks) alone,
 *   except those {@linkcode TEST_ONLY} lists with their reason (an entry
 *   point's exports are the public API, not counted).
 *
 * A budget is raised only in the commit that says why. Before it looks at the
 * package it checks itself: it writes trees holding each budget's n−1, n and
 * n+1 and each import and export rule's breach and its allowed neighbours
 * into a temporary directory and fails unless exactly the breaches are
 * reported, so a slip here cannot make it pass without looking.
 *
 * @module
 */

/** The budgets, in one place. */
export const BUDGETS = { srcFileLines: 500, readmeBytes: 16 * 1024 } as const;

/**
 * Each room's line budget (all its `.ts` files), from issue 30. Where a room
 * was over its target when the budgets became the build's, the budget is its
 * size then, the target beside it: lower it as the room shrinks, never raise
 * it without the reason in the same commit.
 */
export const ROOM_LINES: Readonly<Record<string, number>> = {
  /**
   * The `src/` root files: the core's steps and the kernel. Target 4,400.
   * Raised by 101: the one clock through the configuration, `assertStore`,
   * `assertMethod`, `messageOf`, `problemStatus` (issue 30's "each mechanism
   * once", which moved these from the rooms into the kernel) and the unreadable
   * record's key-list advice (issue 29's review).
   * Raised by 25: `adapt()`, the one seam through which an adapter of
   * another shape (`/hono`) uses the core's guard, so that no room imports
   * the core's private files (issue 30's rule; it was two exceptions).
   * Raised by 242 for issue 31's per-request `ttl`/`lease` (checked per
   * request, the heartbeat paced by each claim's lease, the `misconfigured`
   * problem and `option_error` line), `advertiseLifetime` and the CORS
   * exposure of the middleware's headers, `LIFETIME_HEADER`'s example.
   * Raised by 35: every problem's machine `code` and `retryable` in the
   * catalogue, and the `ProblemCode` union (issue 31).
   * Raised by 245 for issue 31's `jsonFingerprint` and its RFC 8785
   * canonicaliser (`src/_jcs.ts`, 64 lines, local rather than an npm
   * dependency of the core: bench/README.md, JSON fingerprints) and the `key`
   * option (the body-first step, `keyFrom`, its documented option), with the
   * guard's refusals moved to `src/_refusals.ts` so `_guard.ts` stays under 500.
   * Raised by 109 for issue 34's sealing (3.6 – 8.7× faster sealed: bench/
   * README.md, Sealed records): `src/_aead.ts`, AES-256-GCM in line through
   * `node:crypto` with `crypto.subtle` where a runtime has none and past 16
   * KiB (94 lines, the seal's own WebCrypto calls gone from `_seal.ts`), and
   * version 4's one-open replay (the framed body, the older versions' path);
   * `Sealer.open`, which only `read` needed, went.
   */
  core: 5_587,
  /**
   * `src/stores/_shared.ts`, `_sql_rows.ts`, `_store_call.ts`, `_orphans.ts`.
   * Target 320. Raised by 50 for the SQL stores' sweep batches and stats row
   * (issue 32), by 59 for `serviceCalls()` and `timeoutOption()`, the one
   * store-call setup and `timeoutMs` rule every store shares (issue 30), and by
   * 158 moved here from other rooms, which fell by as much: the SQL row
   * decoders from PostgreSQL's room (130; MySQL and SQLite read their rows
   * with them, which was a private import across rooms) and the failover's
   * `claimFinds`/`settle` (28; the CLI shares them).
   */
  "stores/_shared": 662,
  /**
   * `src/stores/redis.ts` + `_redis_*.ts`. Target 1,100. Raised by 13: the
   * hint for a node-redis client without an `error` listener (issue 29's
   * runbook) and `Infinity` as `timeoutMs` (issue 30's one rule).
   */
  "stores/redis": 1_238,
  /** Target 1,100. */
  "stores/postgres": 1_010,
  /** Target 1,100. */
  "stores/kv": 1_295,
  "stores/failover": 522,
  /**
   * Target 400. Raised by 4: records with one header list share one string
   * of it, 10 % less heap a record (bench/README.md, How cost grows).
   */
  "stores/memory": 420,
  /** `src/client/`. Target 630. Raised by 1: it reads the core's defaults. */
  client: 640,
  /**
   * `src/cli/`. Target 480, set when the CLI had one store at a time and two
   * commands; it has since grown the failover's two stores, Redis Cluster,
   * MySQL, SQLite, sealed records and `generate-key` (issues 29, 32), which the
   * help alone spends 100 lines on. Issue 30's dedupe took it from 1,216: one
   * code path for one store or two, `node:util`'s `parseArgs`, the location
   * checked by `locateSlot`. Raised by 84 for `--dynamodb TABLE [--endpoint
   * URL] [--region R]` (issue 33: its target, its checks, its store's opening
   * and the help).
   */
  cli: 1_256,
  /**
   * Target 1,100. Raised by 4: the expiry case of `stats()` times a count
   * first, so that its records outlive a scan of a shared Redis holding a
   * million keys (CI saw the count take seconds).
   */
  testing: 1_104,
  otel: 300,
  /** Target 160. */
  hono: 153,
  /**
   * Target 160. Raised by 15: `locateSlot` exported (its doc and example), the
   * one check of a record's location, which the CLI used to write again.
   */
  inspect: 344,
};
/** A store not named in {@linkcode ROOM_LINES} (`src/stores/<name>.ts` + `_<name>_*.ts`). */
export const NEW_STORE_LINES = 900;
/** Any other new room (a folder of `src/` not named above). */
export const NEW_PART_LINES = 250;

/** The kernel: private files every room may import (docs/architecture.md, Layout). */
export const KERNEL: ReadonlySet<string> = new Set([
  "src/_async.ts",
  "src/_bytes.ts",
  "src/_validate.ts",
  "src/_record.ts",
  "src/key.ts",
  "src/fingerprint.ts",
  "src/_sha256.ts",
  "src/store.ts",
  // The sealed record's codec: the middleware, a store's peek and stats,
  // inspectKey and the CLI's generate-key read seals (docs/architecture.md).
  "src/_seal.ts",
  // AES-256-GCM, in line or through crypto.subtle: the seal's cipher.
  "src/_aead.ts",
  // Which requests a guard claimed: the stores' transactional wrappers ask.
  "src/_claimed.ts",
]);

/** A private import across rooms that stands, and why. */
export interface Allowed {
  /** The importing room (`stores/*`: every store's). */
  from: string;
  /** The imported file, from the repository root. */
  file: string;
  /** Why it stands, and what would end it. */
  why: string;
}

/** The private imports across rooms that stand (each with its reason). */
export const CROSS_ROOM: readonly Allowed[] = [];

/** An export of a private file that only tests import, and why. */
export interface TestOnly {
  /** The file, from the repository root. */
  file: string;
  /** The exported name. */
  name: string;
  /** Why a test needs it. */
  why: string;
}

/** The exports only tests import that stand (each with its reason): issue 30 lists them to go. */
export const TEST_ONLY: readonly TestOnly[] = [
  {
    file: "src/_log.ts",
    name: "logListener",
    why: "drives the log without a middleware",
  },
  {
    file: "src/_record.ts",
    name: "isHeaderPair",
    why: "a property test of the record's header check",
  },
  {
    file: "src/_request.ts",
    name: "served",
    why: "tests tell a served request's body from a plain one",
  },
  {
    file: "src/cli/_report.ts",
    name: "time",
    why:
      "a property test of the relative times (their sign, their unit) over any distance",
  },
  {
    file: "src/cli/_args.ts",
    name: "secretOf",
    why: "a property test of the secret encodings",
  },
  {
    file: "src/stores/_sqlite_sql.ts",
    name: "freeRow",
    why:
      "a property test holds the claim's read (judged) to the upsert's SQL on rows of any type",
  },
  {
    file: "src/fingerprint.ts",
    name: "pathAndQuery",
    why: "a property test of the path's normal form",
  },
  {
    file: "src/idempotency.ts",
    name: "guarding",
    why:
      "tests hand the middleware a fake clock through its configuration (tests/_support/idempotency.ts idempotencyOn), the one clock of docs/architecture.md; users have no clock option",
  },
];

/** The room of a file under `src/` (docs/architecture.md, Layout). */
export function roomOf(path: string): string {
  const rest = path.slice("src/".length);
  const parts = rest.split("/");
  if (parts.length === 1) {
    return ["hono.ts", "otel.ts", "inspect.ts"].includes(rest)
      ? rest.slice(0, -3)
      : "core";
  }
  if (parts[0] !== "stores") return parts[0]!;
  const file = parts[1]!;
  if (
    ["_shared.ts", "_sql_rows.ts", "_store_call.ts", "_orphans.ts"].includes(
      file,
    )
  ) {
    return "stores/_shared";
  }
  const store = /^_?([a-z0-9]+)[_.]/.exec(file)?.[1] ?? file;
  return `stores/${store}`;
}

/** The line budget of `room`. */
export function roomBudget(room: string): number {
  return ROOM_LINES[room] ??
    (room.startsWith("stores/") ? NEW_STORE_LINES : NEW_PART_LINES);
}

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

/** `a/b/../c.ts` → `a/c.ts`, relative to the repository root. */
function normalize(path: string): string {
  const out: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return out.join("/");
}

const IMPORT =
  /(?:import|export)\s+(?:type\s+)?(\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+)\s*from\s*"(\.\.?\/[^"]+\.ts)"|import\(\s*"(\.\.?\/[^"]+\.ts)"/g;
const EXPORT =
  /^export\s+(?:declare\s+)?(?:async\s+)?(?:function\*?|const|let|class|interface|type|enum|abstract\s+class)\s+([A-Za-z_$][\w$]*)/gm;

/** The local imports of `text` (a file at `path`): target file → names (`*`: all). */
function importsOf(path: string, text: string): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  for (const match of text.matchAll(IMPORT)) {
    const target = normalize(`${dir}/${match[2] ?? match[3]}`);
    const names = found.get(target) ?? new Set<string>();
    found.set(target, names);
    const list = match[1];
    if (list === undefined || !list.startsWith("{")) {
      names.add("*");
      continue;
    }
    for (const item of list.slice(1, -1).split(",")) {
      const name = item.trim().replace(/^type\s+/, "").split(/\s+as\s+/)[0]!;
      if (name !== "") names.add(name.trim());
    }
  }
  return found;
}

/** How the rules of a tree are given: the package's own unless a self-test says. */
export interface Rules {
  crossRoom: readonly Allowed[];
  testOnly: readonly TestOnly[];
}

/** What breaks a budget in the tree at `root`, one line each. */
export async function breaches(
  root: string,
  rules: Rules = { crossRoom: CROSS_ROOM, testOnly: TEST_ONLY },
): Promise<string[]> {
  const found: string[] = [];
  const sources = await filesOf(root, "src", (p) => p.endsWith(".ts"));
  const texts = new Map<string, string>();
  for (const path of ["mod.ts", ...sources]) {
    let text: string;
    try {
      text = await Deno.readTextFile(`${root}/${path}`);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      throw error;
    }
    texts.set(path, text);
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
  // Rooms and their lines.
  const rooms = new Map<string, number>();
  for (const path of sources) {
    const room = roomOf(path);
    rooms.set(room, (rooms.get(room) ?? 0) + lineCount(texts.get(path) ?? ""));
  }
  for (const [room, lines] of [...rooms].sort()) {
    const budget = roomBudget(room);
    if (lines > budget) {
      found.push(
        `room ${room}: ${lines} lines, over its ${budget}: simplify, or raise its budget in .ci/budgets.ts in the commit that says why`,
      );
    }
  }
  // Private imports across rooms.
  const used = new Map<string, Set<string>>();
  for (const [path, text] of texts) {
    for (const [target, names] of importsOf(path, text)) {
      const all = used.get(target) ?? new Set<string>();
      names.forEach((n) => all.add(n));
      used.set(target, all);
      if (!target.startsWith("src/") || path === "mod.ts") continue;
      const base = target.slice(target.lastIndexOf("/") + 1);
      const from = roomOf(path);
      const to = roomOf(target);
      if (!base.startsWith("_") || from === to) continue;
      if (KERNEL.has(target) || to === "stores/_shared") continue;
      const allowed = rules.crossRoom.some((a) =>
        a.file === target &&
        (a.from === from ||
          (a.from === "stores/*" && from.startsWith("stores/")))
      );
      if (!allowed) {
        found.push(
          `${path}: imports ${target}, a private file of room ${to}: import its room's public file, or move what both need to the kernel or stores/_shared`,
        );
      }
    }
  }
  // Exports that only tests import.
  const entries = new Set(
    Object.values(
      (JSON.parse(await Deno.readTextFile(`${root}/deno.json`)) as {
        exports?: Record<string, string>;
      }).exports ?? {},
    ).map(normalize),
  );
  const testUse = new Map<string, Set<string>>();
  for (const dir of ["tests", "bench"]) {
    for (const path of await filesOf(root, dir, (p) => p.endsWith(".ts"))) {
      const text = await Deno.readTextFile(`${root}/${path}`);
      for (const [target, names] of importsOf(path, text)) {
        const all = testUse.get(target) ?? new Set<string>();
        names.forEach((n) => all.add(n));
        testUse.set(target, all);
      }
    }
  }
  for (const path of sources) {
    if (entries.has(path)) continue;
    const inSrc = used.get(path) ?? new Set<string>();
    const inTests = testUse.get(path) ?? new Set<string>();
    if (inSrc.has("*")) continue;
    for (const match of (texts.get(path) ?? "").matchAll(EXPORT)) {
      const name = match[1]!;
      if (inSrc.has(name) || !inTests.has(name)) continue;
      if (rules.testOnly.some((t) => t.file === path && t.name === name)) {
        continue;
      }
      found.push(
        `${path}: exports ${name} for tests only: test through the public file, or list it in TEST_ONLY with the reason`,
      );
    }
  }
  return found;
}

/** Writes `text` at `root/path`, making its folders. */
async function put(root: string, path: string, text: string): Promise<void> {
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  await Deno.mkdir(`${root}/${dir}`, { recursive: true });
  await Deno.writeTextFile(`${root}/${path}`, text);
}

/** Writes `lines` lines into room files under `prefix` (each ≤ 400 lines). */
async function fill(root: string, files: string[], lines: number) {
  const each = Math.ceil(lines / files.length);
  let left = lines;
  for (const file of files) {
    const n = Math.min(each, left);
    left -= n;
    await put(root, file, "x\n".repeat(n));
  }
}

/** A file of each room, enough of them that none passes 500 lines. */
function roomFiles(room: string, lines: number): string[] {
  const count = Math.max(1, Math.ceil(lines / 400));
  const files: string[] = [];
  for (let i = 0; i < count; i++) {
    if (room === "core") files.push(`src/_core${i}.ts`);
    else if (["hono", "otel", "inspect"].includes(room)) {
      files.push(`src/${room}.ts`);
    } else if (room === "stores/_shared") {
      files.push(
        ["src/stores/_shared.ts", "src/stores/_store_call.ts"][i]!,
      );
    } else if (room.startsWith("stores/")) {
      const store = room.slice("stores/".length);
      files.push(
        i === 0 ? `src/stores/${store}.ts` : `src/stores/_${store}_${i}.ts`,
      );
    } else files.push(`src/${room}/_part${i}.ts`);
  }
  return files;
}

/** Checks `breaches()` on trees at each budget's n−1, n and n+1, and each rule's breach. */
async function selfTest(): Promise<void> {
  const fail = (what: string, got: unknown) => {
    throw new Error(`budgets self-test: ${what}, got ${JSON.stringify(got)}`);
  };
  const dir = await Deno.makeTempDir({ prefix: "budgets_" });
  try {
    // Files and README.
    const files = `${dir}/files`;
    await put(files, "deno.json", "{}");
    const lines = (n: number) => "x\n".repeat(n);
    const n = BUDGETS.srcFileLines;
    await put(files, "src/_under.ts", lines(n - 1));
    await put(files, "src/_at.ts", lines(n));
    await put(files, "src/_over.ts", lines(n + 1));
    await put(files, "src/over.md", lines(n + 1)); // not code
    await put(files, "README.md", "r".repeat(BUDGETS.readmeBytes));
    const atReadme = await breaches(files);
    await put(files, "README.md", "r".repeat(BUDGETS.readmeBytes + 1));
    const overReadme = await breaches(files);
    if (
      !(atReadme.length === 1 &&
        atReadme[0]!.startsWith(`src/_over.ts: ${n + 1} lines`) &&
        overReadme.length === 2 &&
        overReadme[1]!.startsWith(
          `README.md: ${BUDGETS.readmeBytes + 1} bytes`,
        ))
    ) fail("expected only the n+1 file and README", [atReadme, overReadme]);

    // Rooms at n−1, n and n+1: a new store and a new part too.
    const rooms = {
      ...ROOM_LINES,
      "stores/sqlite": NEW_STORE_LINES,
      openapi: NEW_PART_LINES,
    };
    for (const delta of [-1, 0, 1]) {
      const tree = `${dir}/rooms${delta}`;
      await put(tree, "deno.json", "{}");
      for (const [room, budget] of Object.entries(rooms)) {
        await fill(tree, roomFiles(room, budget + delta), budget + delta);
      }
      const got = await breaches(tree);
      const want = delta <= 0
        ? []
        : Object.entries(rooms).map(([room, b]) =>
          `room ${room}: ${b + 1} lines, over its ${b}`
        ).sort();
      const seen = got.map((l) => l.slice(0, l.indexOf(":", 6) + 1)).sort();
      const wanted = want.map((l) => l.slice(0, l.indexOf(":", 6) + 1)).sort();
      if (
        got.length !== want.length ||
        !want.every((w) => got.some((g) => g.startsWith(w))) ||
        JSON.stringify(seen) !== JSON.stringify(wanted)
      ) fail(`rooms at budget${delta >= 0 ? "+" : ""}${delta}`, got);
    }

    // Private imports: across rooms refused; same room, kernel, stores/_shared,
    // a public file and a listed pair allowed.
    const imports = `${dir}/imports`;
    await put(imports, "deno.json", "{}");
    await put(imports, "src/_guard.ts", "export const g = 1;\n");
    await put(imports, "src/_async.ts", "export const a = 1;\n");
    await put(imports, "src/problem.ts", "export const p = 1;\n");
    await put(imports, "src/stores/_shared.ts", "export const s = 1;\n");
    await put(imports, "src/stores/_redis_x.ts", "export const r = 1;\n");
    await put(imports, "src/cli/_args.ts", "export const c = 1;\n");
    await put(
      imports,
      "src/cli/cli.ts",
      [
        'import { c } from "./_args.ts";',
        'import { a } from "../_async.ts";',
        'import { p } from "../problem.ts";',
        'import { s } from "../stores/_shared.ts";',
        'import { g } from "../_guard.ts";',
        'import type { r } from "../stores/_redis_x.ts";',
        "",
      ].join("\n"),
    );
    await put(imports, "src/hono.ts", 'import { g } from "./_guard.ts";\n');
    const cross = await breaches(imports, {
      crossRoom: [{ from: "hono", file: "src/_guard.ts", why: "test" }],
      testOnly: [],
    });
    if (
      !(cross.length === 2 &&
        cross[0]!.startsWith("src/cli/cli.ts: imports src/_guard.ts,") &&
        cross[1]!.startsWith("src/cli/cli.ts: imports src/stores/_redis_x.ts,"))
    ) fail("expected the cli's two private imports across rooms only", cross);

    // Exports only tests import: refused unless listed; an entry's allowed.
    const exports = `${dir}/exports`;
    await put(exports, "deno.json", '{"exports":{"./x":"./src/x.ts"}}');
    await put(
      exports,
      "src/_a.ts",
      "export const used = 1;\nexport const onlyTests = 2;\nexport function listed() {}\nexport type Nobody = 3;\n",
    );
    await put(
      exports,
      "src/x.ts",
      'import { used } from "./_a.ts";\nexport const pub = 1;\n',
    );
    await put(
      exports,
      "tests/a_test.ts",
      'import { listed, onlyTests, used } from "../src/_a.ts";\nimport { pub } from "../src/x.ts";\n',
    );
    const onlyTests = await breaches(exports, {
      crossRoom: [],
      testOnly: [{ file: "src/_a.ts", name: "listed", why: "test" }],
    });
    if (
      !(onlyTests.length === 1 &&
        onlyTests[0]!.startsWith("src/_a.ts: exports onlyTests for tests only"))
    ) fail("expected onlyTests alone", onlyTests);
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
  console.log(
    "Budgets hold: source files ≤ 500 lines, README.md ≤ 16 KiB, every room within its lines, no private import across rooms, no export for tests only.",
  );
}
