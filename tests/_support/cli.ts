// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `@idempotent/http/cli` run in a process of its own, as an operator runs it.
 * @module
 */

import assert from "node:assert/strict";

const CLI = new URL("../../src/cli/cli.ts", import.meta.url).pathname;
const decoder = new TextDecoder();

/** What one run of the CLI did. */
export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI with `args` and the environment variables `env`. */
export async function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<Run> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", CLI, ...args],
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}

/** Runs the CLI and checks its exit code, showing its output if it differs. */
export async function expectExit(
  code: number,
  args: string[],
  env: Record<string, string> = {},
): Promise<Run> {
  const run = await cli(args, env);
  assert.equal(
    run.code,
    code,
    `cli ${args.join(" ")} exited ${run.code}:\n${run.stdout}${run.stderr}`,
  );
  return run;
}
