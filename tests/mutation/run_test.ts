// Copyright 2026 the @idempotent/http authors. MIT license.
import assert from "node:assert/strict";
import type { Mutant } from "./mutants.ts";
import {
  choose,
  formatScores,
  listByModule,
  scoreByModule,
  type Verdict,
} from "./run.ts";

function mutant(id: string, file: string): Mutant {
  return { id, file, text: id, replacement: "", tests: [], what: `${id} bug` };
}

const A = mutant("a1", "src/a.ts");
const A2 = mutant("a2", "src/a.ts");
const B = mutant("b1", "src/b.ts");
const C = mutant("c1", "src/c.ts");

function outcome(m: Mutant, verdict: Verdict) {
  return { mutant: m, verdict };
}

Deno.test("mutate scores each module, weakest first", () => {
  const scores = scoreByModule([
    outcome(A, "caught"),
    outcome(A2, "caught"),
    outcome(B, "survived"),
    outcome(mutant("b2", "src/b.ts"), "timeout"),
    outcome(C, "caught"),
    outcome(mutant("c2", "src/c.ts"), "invalid"),
  ]);
  assert.deepEqual(scores, [
    { file: "src/b.ts", caught: 1, total: 2, invalid: 0 },
    { file: "src/a.ts", caught: 2, total: 2, invalid: 0 },
    { file: "src/c.ts", caught: 1, total: 1, invalid: 1 },
  ]);
});

Deno.test("mutate sorts equal shares by survivors, then by name", () => {
  const scores = scoreByModule([
    outcome(mutant("z", "src/z.ts"), "survived"),
    outcome(A, "survived"),
    outcome(A2, "caught"),
    outcome(B, "survived"),
    outcome(mutant("b2", "src/b.ts"), "survived"),
    outcome(mutant("b3", "src/b.ts"), "caught"),
    outcome(mutant("b4", "src/b.ts"), "caught"),
    outcome(mutant("only-invalid", "src/i.ts"), "invalid"),
  ]).map((s) => s.file);
  assert.deepEqual(scores, [
    "src/i.ts", // nothing scored
    "src/z.ts", // 0 %
    "src/b.ts", // 50 %, two survivors
    "src/a.ts", // 50 %, one survivor
  ]);
});

Deno.test("mutate prints caught/total and a percentage that is 100 only when all are caught", () => {
  const lines = formatScores([
    { file: "src/long_name.ts", caught: 199, total: 200, invalid: 0 },
    { file: "src/a.ts", caught: 3, total: 3, invalid: 2 },
    { file: "src/n.ts", caught: 0, total: 0, invalid: 1 },
  ]);
  assert.deepEqual(lines, [
    "  src/long_name.ts  199/200   99%",
    "  src/a.ts              3/3  100%, 2 invalid",
    "  src/n.ts              0/0    0%, 1 invalid",
  ]);
});

Deno.test("mutate --list groups the mutants by module", () => {
  assert.deepEqual(listByModule([B, A, C, A2]), [
    "src/a.ts (2)",
    "  a1\ta1 bug",
    "  a2\ta2 bug",
    "src/b.ts (1)",
    "  b1\tb1 bug",
    "src/c.ts (1)",
    "  c1\tc1 bug",
  ]);
});

Deno.test("mutate --module keeps one file's mutants, with or without --only", () => {
  const all = [A, B, A2, C];
  assert.deepEqual(choose(all, []), all);
  assert.deepEqual(choose(all, ["--module=src/a.ts"]), [A, A2]);
  assert.deepEqual(choose(all, ["--module=./src/a.ts"]), [A, A2]);
  assert.deepEqual(choose(all, ["--module=src/a.ts", "--only=a2,b1"]), [A2]);
  assert.deepEqual(choose(all, ["--only=b1,c1"]), [B, C]);
});

Deno.test("mutate refuses an unknown module or mutant id", () => {
  const all = [A, B];
  const module = choose(all, ["--module=src/x.ts"]);
  assert.equal(typeof module, "string");
  assert.match(module as string, /No mutants for module src\/x\.ts/);
  assert.match(module as string, /src\/a\.ts\n {2}src\/b\.ts/);
  assert.equal(
    choose(all, ["--only=a1,nope"]),
    "Unknown mutant id(s): nope",
  );
});
