// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Every fenced code block in README.md and docs/*.md (the design,
 * docs/architecture.md, aside) is a test: it runs
 * here, against the
 * Redis and PostgreSQL the other integration tests use, or it is a fragment
 * of an example that runs here. A block that is neither fails this test with
 * its line number, so a new snippet cannot rot unnoticed.
 *
 * ## The convention
 *
 * Each fenced block is preceded by an HTML comment (blank lines may sit
 * between the comment and the fence) that says what to do with it:
 *
 * - `<!-- readme-test: file NAME -->`: the block is saved as NAME in a
 *   scratch project whose `deno.json` maps `@idempotent/http` and its
 *   subpaths to this checkout (as `deno add jsr:@idempotent/http` would map
 *   them to the package) together with the npm packages this project pins,
 *   and every such file is type-checked with `deno check` (with the examples
 *   that fragments come from).
 * - `<!-- readme-test: serve [PATH] -->`: a shell block of commands, each
 *   of which starts a server on port 8000 (a `deno run` of a `file` block or
 *   of an example; `VAR=value` before it is passed as environment, with
 *   `DATABASE_URL`, `REDIS_URL` and `MYSQL_URL` set to the test's services). Each runs in
 *   the scratch project (where `examples/` is this checkout's), with
 *   `DENO_SERVE_ADDRESS` moving its `Deno.serve` to a free port, and stays
 *   up until the next server starts. Unless a `client` block talks to it,
 *   the test then POSTs PATH (default `/payments`) twice with one fresh key
 *   and expects a 2xx, then the same status and body with
 *   `idempotent-replayed: true`.
 * - `<!-- readme-test: client -->`: a shell block of `curl` commands against
 *   the last server (`localhost:8000` and `127.0.0.1:8000` are pointed at
 *   it). The `# ` lines after a command are what it prints: each must equal
 *   a line of its output, in order (other output lines may come between);
 *   `…` matches anything.
 * - `<!-- readme-test: exits -->`: a shell block of `deno` commands (`deno
 *   task NAME` included), run in the scratch project, each of which must
 *   exit 0; `# ` lines after a command are matched against its output as for
 *   `client`.
 * - `<!-- readme-test: cli -->`: a shell block for `@idempotent/http/cli`.
 *   `alias idem="deno run -A --unstable-kv jsr:@idempotent/http/cli"` must
 *   be written so (the package's `./cli`); `NAME="value"` sets a variable;
 *   every other command starts with `idem` and runs this checkout's
 *   `src/cli/cli.ts`, `$NAME` expanded (`$REDIS_URL` and `$DATABASE_URL` are the
 *   test's services; unquoted, it splits into words). It must exit 0 or 1
 *   (found or absent, never a usage error or an unreachable store); `# `
 *   lines are matched as for `client`. Every inline code span of the text
 *   that starts with `idem ` runs the same way, after the blocks.
 * - `<!-- readme-test: fragment FILE -->`: the block occurs verbatim in FILE
 *   (a path in this checkout, normally under `examples/`), line by line,
 *   indentation aside; its first line may be the end of a line of FILE and
 *   its last line the start of one. FILE itself must be run by a `serve` or
 *   `exits` block of the README.
 * - `<!-- readme-test: runbook NAME -->`: a situation of docs/operations.md's
 *   runbook, run by tests/operations_test.ts in the situation it names (on
 *   servers it starts and stops); skipped here.
 *
 * Every `deno task NAME` that those documents or CONTRIBUTING.md name, in a block
 * or in the text, must be a task of deno.json, and a `docker compose` there
 * needs docker-compose.yml.
 *
 * Ignored, with the reason in its name, when Redis or PostgreSQL is
 * unreachable (a failure with `IDEMPOTENCY_REQUIRE_SERVICES=1`, as in CI).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  POSTGRES_IGNORE,
  REDIS_IGNORE,
  redisServerIgnore,
  testName,
} from "./_support/services.ts";
import { MYSQL_IGNORE } from "./_support/mariadb.ts";
import {
  type Block,
  expandWords,
  fencedBlocks,
  shellWords,
} from "./_support/markdown.ts";
import {
  containsFragment,
  CONTRIBUTING,
  DOCUMENTS,
  ROOT,
  Runner,
} from "./_support/readme_runner.ts";

const KINDS: Record<string, (runner: Runner, block: Block) => Promise<void>> = {
  file: () => Promise.resolve(), // written and checked in setUp
  serve: (runner, block) => runner.serve(block),
  client: (runner, block) => runner.client(block),
  exits: (runner, block) => runner.exits(block),
  cli: (runner, block) => runner.cli(block),
  fragment: (runner, block) => runner.fragment(block),
  runbook: () => Promise.resolve(), // covered by tests/operations_test.ts
};

const IGNORE = REDIS_IGNORE || POSTGRES_IGNORE || MYSQL_IGNORE ||
  await redisServerIgnore();

Deno.test({
  name: testName(
    "README.md and the docs it links: every code block runs or is a tested fragment",
    IGNORE,
  ),
  ignore: IGNORE !== false,
  // node-redis and postgres.js keep timers for a while after they close.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const texts = await Promise.all(
      DOCUMENTS.map((doc) => Deno.readTextFile(new URL(doc, ROOT))),
    );
    const blocks = texts.flatMap((text, i) => fencedBlocks(text, DOCUMENTS[i]));
    const unknown = blocks.filter((b) =>
      b.marker === null || !(b.marker[0]! in KINDS)
    );
    assert.deepEqual(
      unknown.map((b) =>
        `${b.file}:${b.line} (${b.lang || "no language"}): ${
          b.marker === null
            ? "no <!-- readme-test: … --> marker before this block"
            : `unknown kind '${b.marker[0]}'`
        }`
      ),
      [],
      "Every README block needs a marker saying how it is tested: see tests/readme_test.ts",
    );
    const runner = new Runner();
    try {
      await runner.setUp(blocks);
      for (const block of blocks) {
        const kind = block.marker![0]!;
        await t.step(
          `${block.file}:${block.line} ${block.lang} ${
            block.marker!.join(" ")
          }`,
          () => KINDS[kind]!(runner, block),
        );
      }
      await t.step("the last server", () => runner.stop());
      await t.step("every inline `idem …` command runs", async () => {
        for (const [i, text] of texts.entries()) {
          const prose = text.replace(/^(`{3,}|~{3,})[^]*?^\1\s*$/gm, "");
          const lines = new Set(
            [...prose.matchAll(/`(idem [^`]+)`/g)].map((m) => m[1]!),
          );
          for (const line of lines) {
            const at = text.slice(0, text.indexOf(line)).split("\n").length;
            await runner.idem(`${DOCUMENTS[i]}:${at}`, line, []);
          }
        }
      });
      await t.step("every fragment's file runs in a README command", () => {
        const files = blocks.filter((b) => b.marker![0] === "fragment")
          .map((b) => b.marker![1]!);
        const unrun = [...new Set(files)].filter((f) => !runner.ran.has(f));
        assert.deepEqual(
          unrun,
          [],
          "fragments of files no README command runs",
        );
      });
    } finally {
      await runner.tearDown();
    }
  },
});

Deno.test("README.md, the docs it links and CONTRIBUTING.md name only tasks deno.json has", async () => {
  const config = JSON.parse(
    await Deno.readTextFile(new URL("deno.json", ROOT)),
  ) as { tasks: Record<string, string> };
  for (const doc of [...DOCUMENTS.map((d) => new URL(d, ROOT)), CONTRIBUTING]) {
    const text = await Deno.readTextFile(doc);
    const named = [...text.matchAll(/deno task ([\w:-]+)/g)].map((m) => m[1]!);
    const missing = named.filter((name) => !(name in config.tasks));
    assert.deepEqual(missing, [], `${doc.pathname}: tasks deno.json lacks`);
    if (text.includes("docker compose")) {
      await Deno.stat(new URL("docker-compose.yml", ROOT));
    }
  }
});

Deno.test("fencedBlocks() reads markers, and containsFragment() matches fragments", () => {
  const md = [
    "<!-- readme-test: file a.ts -->",
    "",
    "```ts ignore",
    "  const x = 1;",
    "```",
    "text",
    "```sh",
    "echo",
    "```",
  ].join("\n");
  const blocks = fencedBlocks(md);
  assert.deepEqual(blocks.map((b) => [b.line, b.lang, b.marker]), [
    [3, "ts", ["file", "a.ts"]],
    [7, "sh", null],
  ]);
  const file = "const guarded = idempotency(handler, {\n  a: 1,\n});\n";
  assert.ok(containsFragment(file, "idempotency(handler, {\n  a: 1,\n})"));
  assert.ok(!containsFragment(file, "idempotency(handler, {\n  a: 2,\n})"));
  assert.deepEqual(
    expandWords(`idem $STORE --key "$K" # note`, {
      STORE: "--redis redis://h",
      K: "a b",
    }),
    ["idem", "--redis", "redis://h", "--key", "a b"],
  );
  assert.deepEqual(shellWords(`curl -H 'A: b c' -d "x" # note`), [
    "curl",
    "-H",
    "A: b c",
    "-d",
    "x",
  ]);
});
