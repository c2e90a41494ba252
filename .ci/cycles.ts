// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * Fails on any import cycle among the package's own modules (`mod.ts` and
 * `src/`), type-only imports included: `deno task check` runs it. The graph
 * comes from `deno info --json` on `mod.ts`, every entry point in
 * `deno.json`'s `exports` and every file of `src/` (one that no entry point
 * imports included).
 *
 * Before it looks at the package it checks itself: it writes two modules
 * that import each other's types into a temporary directory and fails unless
 * it finds that cycle, so a change in `deno info`'s output cannot make it
 * pass without looking. To see a failure by hand, add
 * `import type { Guard } from "./_guard.ts";` to `src/options.ts` and run
 * `deno task check`.
 *
 * @module
 */

/** `deno info --json`, the parts read here. */
interface Info {
  modules: {
    specifier: string;
    dependencies?: {
      code?: { specifier: string };
      type?: { specifier: string };
    }[];
  }[];
}

/** Each module's local imports, code and type-only alike, by specifier. */
type Graph = Map<string, Set<string>>;

/**
 * Adds the import graph of `entry` to `graph`, keeping only the modules
 * `keep` accepts.
 */
async function addGraph(
  graph: Graph,
  entry: string,
  keep: (specifier: string) => boolean,
): Promise<void> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!output.success) throw new Error(`deno info ${entry} failed`);
  const info: Info = JSON.parse(new TextDecoder().decode(output.stdout));
  for (const module of info.modules) {
    if (!keep(module.specifier)) continue;
    const imports = graph.get(module.specifier) ?? new Set();
    graph.set(module.specifier, imports);
    for (const dependency of module.dependencies ?? []) {
      for (const to of [dependency.code, dependency.type]) {
        if (to !== undefined && keep(to.specifier)) imports.add(to.specifier);
      }
    }
  }
}

/**
 * The cycles of `graph`: its strongly connected components of more than
 * one module, or of one that imports itself (Tarjan's algorithm).
 */
function cycles(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || graph.get(node)?.has(node)) {
      found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

/** Every `.ts` file below `dir`, as paths relative to the root. */
async function sources(dir: URL, prefix: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isDirectory) {
      const sub = new URL(`${entry.name}/`, dir);
      found.push(...await sources(sub, `${prefix}${entry.name}/`));
    } else if (entry.name.endsWith(".ts")) {
      found.push(`${prefix}${entry.name}`);
    }
  }
  return found;
}

/** Fails unless a type-only cycle written for the purpose is found. */
async function selfTest(): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "cycles_" });
  try {
    await Deno.writeTextFile(
      `${dir}/a.ts`,
      'import type { B } from "./b.ts";\nexport type A = B[];\n',
    );
    await Deno.writeTextFile(
      `${dir}/b.ts`,
      'import type { A } from "./a.ts";\nexport type B = { a: A };\n',
    );
    const graph: Graph = new Map();
    const root = new URL(`file://${dir}/`).href;
    await addGraph(graph, `${dir}/a.ts`, (s) => s.startsWith(root));
    if (cycles(graph).length !== 1) {
      throw new Error("cycles.ts: the self-test's a.ts <-> b.ts went unseen");
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  await selfTest();
  const root = new URL("../", import.meta.url);
  const config = JSON.parse(
    await Deno.readTextFile(new URL("deno.json", root)),
  );
  const entries = new Set<string>([
    "./mod.ts",
    ...Object.values(config.exports as Record<string, string>),
    ...await sources(new URL("src/", root), "./src/"),
  ]);
  const own = (specifier: string) =>
    specifier === new URL("mod.ts", root).href ||
    specifier.startsWith(new URL("src/", root).href);
  const graph: Graph = new Map();
  for (const entry of entries) {
    await addGraph(graph, new URL(entry, root).pathname, own);
  }
  const found = cycles(graph);
  for (const cycle of found) {
    const names = cycle.map((s) => s.slice(root.href.length));
    console.error(`import cycle: ${names.join(" <-> ")}`);
  }
  if (found.length > 0) Deno.exit(1);
  console.log(`no import cycle among ${graph.size} modules`);
}
