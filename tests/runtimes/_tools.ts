// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Where the runtime tests find Node, Bun, workerd and `tsc`, and how they
 * bundle the library for them.
 *
 * `.ci/runtimes.sh` installs Bun, workerd, TypeScript, `@types/node` and the
 * Node-side packages (pinned in `.ci/runtimes/package.json`) into
 * `.ci/.tools/runtimes`; Node itself comes from the PATH. A missing runtime
 * makes its tests ignored with the reason in their names; with
 * `IDEMPOTENCY_REQUIRE_SERVICES=1` (as CI sets) they run anyway, and fail.
 *
 * @module
 */
import { REQUIRE_SERVICES } from "../_support/services.ts";

/** The folder `.ci/runtimes.sh` installs into. */
export const TOOLS: string =
  new URL("../../.ci/.tools/runtimes", import.meta.url)
    .pathname;

const ROOT = new URL("../../", import.meta.url).pathname;

/** How to run one of the tools, or why it cannot run. */
export interface Tool {
  /** The command to spawn. */
  path: string;
  /** `false`, or why the tests that need it are ignored. */
  ignore: false | string;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

async function version(path: string): Promise<string | null> {
  try {
    const { success, stdout } = await new Deno.Command(path, {
      args: ["--version"],
      stdout: "piped",
      stderr: "null",
    }).output();
    return success ? new TextDecoder().decode(stdout).trim() : null;
  } catch {
    return null;
  }
}

async function find(
  name: string,
  accept: (version: string) => boolean = () => true,
  wanted = name,
): Promise<Tool> {
  const installed = `${TOOLS}/node_modules/.bin/${name}`;
  const path = await exists(installed) ? installed : name;
  const found = await version(path);
  if (found !== null && accept(found)) return { path, ignore: false };
  if (REQUIRE_SERVICES) return { path, ignore: false };
  return {
    path,
    ignore: `${wanted} not found${
      found === null ? "" : ` (found ${found})`
    }; run .ci/runtimes.sh (IDEMPOTENCY_REQUIRE_SERVICES=1 makes this a failure)`,
  };
}

/** Node 20 or later, from the PATH. */
export const NODE: Tool = await find(
  "node",
  (v) => Number(/^v(\d+)/.exec(v)?.[1] ?? 0) >= 20,
  "Node 20+",
);
/** The npm packages the bundles import (drivers, Hono's Node server). */
export const NPM_PACKAGES: Tool = {
  path: `${TOOLS}/node_modules`,
  ignore: REQUIRE_SERVICES ||
      await exists(`${TOOLS}/node_modules/@hono/node-server/package.json`)
    ? false
    : "the runtime tests' npm packages are not installed; run .ci/runtimes.sh (IDEMPOTENCY_REQUIRE_SERVICES=1 makes this a failure)",
};
/** Bun, from `.ci/.tools/runtimes` or the PATH. */
export const BUN: Tool = await find("bun");
/** workerd, from `.ci/.tools/runtimes` or the PATH. */
export const WORKERD: Tool = await find("workerd");
/** TypeScript's `tsc` with `@types/node`, from `.ci/.tools/runtimes`. */
export const TSC: Tool = await (async () => {
  const tsc = await find("tsc", () => true, "tsc (npm typescript)");
  if (tsc.ignore || REQUIRE_SERVICES) return tsc;
  if (await exists(`${TOOLS}/node_modules/@types/node`)) return tsc;
  return {
    ...tsc,
    ignore:
      "@types/node not found; run .ci/runtimes.sh (IDEMPOTENCY_REQUIRE_SERVICES=1 makes this a failure)",
  };
})();

/**
 * Joins the reasons of the tools a test needs.
 *
 * @param tools What the test needs.
 * @returns `false` when all are there, else the first reason.
 */
export function ignoreUnless(
  ...tools: (Tool | false | string)[]
): false | string {
  for (const tool of tools) {
    const reason = typeof tool === "object" ? tool.ignore : tool;
    if (reason) return reason;
  }
  return false;
}

/**
 * Bundles an entry file with `deno bundle` into one ESM file.
 *
 * @param entry The entry, relative to the repository root.
 * @param output Where the bundle goes.
 * @param external The npm packages left as imports (the runtime resolves
 *   them from `.ci/.tools/runtimes/node_modules`).
 */
export async function bundle(
  entry: string,
  output: string,
  external: string[] = [],
): Promise<void> {
  const { success, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "deno",
      ...external.flatMap((name) => ["--external", name]),
      "-o",
      output,
      entry,
    ],
    cwd: ROOT,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!success) {
    throw new Error(
      `deno bundle ${entry} failed:\n${new TextDecoder().decode(stderr)}`,
    );
  }
}

/**
 * Runs a command to its end.
 *
 * @param path The command.
 * @param args Its arguments.
 * @param cwd Where it runs.
 * @returns Its exit code and its output.
 */
export async function run(
  path: string,
  args: string[],
  cwd: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { code, stdout, stderr } = await new Deno.Command(path, {
    args,
    cwd,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code, stdout: text.decode(stdout), stderr: text.decode(stderr) };
}

/** A server process the test started, and where it listens. */
export interface Server extends AsyncDisposable {
  /** Its base URL, `http://127.0.0.1:PORT`. */
  url: string;
}

/**
 * Starts a server process that prints `listening on http://HOST:PORT` when it
 * is ready, and waits for that line (or for the process to end, which is an
 * error with its output).
 *
 * @param path The command.
 * @param args Its arguments.
 * @param options Its working folder and extra environment.
 * @returns The server, stopped (SIGTERM) when disposed.
 */
export async function startServer(
  path: string,
  args: string[],
  options: { cwd: string; env?: Record<string, string> },
): Promise<Server> {
  const child = new Deno.Command(path, {
    args,
    cwd: options.cwd,
    env: { PORT: "0", NO_COLOR: "1", ...options.env },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const errors = new Response(child.stderr).text();
  const lines = child.stdout.pipeThrough(new TextDecoderStream());
  const reader = lines.getReader();
  let seen = "";
  let url: string | undefined;
  while (url === undefined) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += value;
    url = /listening on (http:\/\/[\d.]+:\d+)/.exec(seen)?.[1];
  }
  // Keep draining stdout so the child never blocks on a full pipe.
  const drained = (async () => {
    while (!(await reader.read()).done) { /* drain */ }
  })();
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    await child.status;
    await drained;
    return await errors;
  };
  if (url === undefined) {
    const stderr = await stop();
    throw new Error(
      `${path} ${args.join(" ")} did not start:\n${seen}\n${stderr}`,
    );
  }
  return { url, [Symbol.asyncDispose]: async () => void await stop() };
}

/**
 * A free loopback port (the OS's pick, released at once for the caller).
 *
 * @returns The port.
 */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}
