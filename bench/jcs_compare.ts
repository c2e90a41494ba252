// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * The canonicaliser behind `jsonFingerprint`, chosen on numbers: the local one
 * (`src/_jcs.ts`) against the npm `canonicalize` package (5.1.0, by RFC
 * 8785's authors), on Deno, and bundled (`deno bundle`) on Node, Bun and
 * workerd from `.ci/runtimes.sh`: RFC 8785's examples, the edges, and speed
 * as ratios in the same run (bench/_jcs_cases.ts; workerd's clock stands
 * coarse while code runs, so it gets the checks only). Figures:
 * bench/README.md, JSON fingerprints.
 *
 *     deno run -A bench/jcs_compare.ts
 *
 * @module
 */

import { findings } from "./_jcs_cases.ts";
import {
  BUN,
  bundle,
  freePort,
  NODE,
  run,
  TOOLS,
  WORKERD,
} from "../tests/runtimes/_tools.ts";

const results: Record<string, unknown> = { Deno: await findings() };

const dir = await Deno.makeTempDir({ dir: TOOLS, prefix: "jcs-" });
try {
  // Bun serves a module whose default export has `fetch`: two entries.
  const from = new URL("./_jcs_cases.ts", import.meta.url);
  const entries = {
    main: `import process from "node:process";
process.stdout.write(JSON.stringify(await findings()));`,
    worker:
      "export default { fetch: async () => Response.json(await findings()) };",
  };
  for (const [name, body] of Object.entries(entries)) {
    await Deno.writeTextFile(
      `${dir}/${name}.ts`,
      `import { findings } from "${from}";\n${body}\n`,
    );
    await bundle(`${dir}/${name}.ts`, `${dir}/${name}.mjs`);
  }
  for (const [name, tool] of [["Node", NODE], ["Bun", BUN]] as const) {
    if (tool.ignore) {
      results[name] = tool.ignore;
      continue;
    }
    const { code, stdout, stderr } = await run(tool.path, ["main.mjs"], dir);
    results[name] = code === 0 ? JSON.parse(stdout) : stderr;
  }
  results.workerd = WORKERD.ignore || await onWorkerd(dir);
} finally {
  await Deno.remove(dir, { recursive: true });
}
console.log(JSON.stringify(results, null, 2));

/** Serves the bundle as a worker and reads its findings. */
async function onWorkerd(dir: string): Promise<unknown> {
  const port = freePort();
  await Deno.writeTextFile(
    `${dir}/config.capnp`,
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .main)],
  sockets = [(name = "main", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const main :Workerd.Worker = (
  modules = [(name = "worker.mjs", esModule = embed "worker.mjs")],
  compatibilityDate = "2024-09-23",
);
`,
  );
  const child = new Deno.Command(WORKERD.path, {
    args: ["serve", "config.capnp"],
    cwd: dir,
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    for (let attempt = 0; attempt < 200; attempt++) {
      try {
        return await (await fetch(`http://127.0.0.1:${port}/`)).json();
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    return "workerd did not answer";
  } finally {
    child.kill("SIGTERM");
    await child.status;
  }
}
