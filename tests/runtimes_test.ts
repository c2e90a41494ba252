// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The runtime matrix: the library bundled with `deno bundle` and run on Node,
 * Bun and workerd (the protocol cases of tests/runtimes/smoke.ts, on
 * MemoryStore everywhere, on RedisStore and PostgresStore over their npm
 * drivers on Node, Bun and workerd, the last with `nodejs_compat`); the
 * public types under `tsc` with Node's types; and the
 * framework examples (Hono on Node, Oak on Deno) over real HTTP.
 *
 * The runtimes come from `.ci/runtimes.sh` (tests/runtimes/_tools.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  DATABASE_URL,
  POSTGRES_IGNORE,
  REDIS_IGNORE,
  REDIS_URL,
  testName,
  uniquePrefix,
} from "./_support/services.ts";
import type { Check } from "./runtimes/smoke.ts";
import {
  BUN,
  bundle,
  freePort,
  ignoreUnless,
  NODE,
  NPM_PACKAGES,
  run,
  startServer,
  TOOLS,
  TSC,
  WORKERD,
} from "./runtimes/_tools.ts";
import { idempotency, type ServeHandlerInfo } from "../mod.ts";

/** A temporary folder under the tools folder (so bundles find its npm packages). */
async function scratch(): Promise<string & AsyncDisposable> {
  const dir = await Deno.makeTempDir({ dir: TOOLS, prefix: "run-" });
  return Object.assign(dir, {
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  }) as string & AsyncDisposable;
}

function assertChecks(checks: Check[], expectedCount: number): void {
  for (const { name, expected, actual } of checks) {
    assert.deepEqual(actual, expected, name);
  }
  assert.equal(checks.length, expectedCount, "every case reported");
}

const CASES = 12; // checks per store in tests/runtimes/smoke.ts

function parseChecks(
  result: { code: number; stdout: string; stderr: string },
): Check[] {
  assert.equal(result.code, 0, `exit code; stderr:\n${result.stderr}`);
  return JSON.parse(result.stdout) as Check[];
}

// --- Types ------------------------------------------------------------------

Deno.test("ServeHandlerInfo: Deno.serve's info fits it, and is passed through", async () => {
  const fits: (info: Deno.ServeHandlerInfo) => ServeHandlerInfo = (info) =>
    info;
  assert.equal(typeof fits, "function");
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    idempotency((_request, info) => {
      const addr = info?.remoteAddr;
      return new Response(
        addr?.transport === "tcp" ? `${addr.transport} ${addr.hostname}` : "",
      );
    }, { scope: "global" }),
  );
  const response = await fetch(`http://127.0.0.1:${server.addr.port}/`);
  assert.equal(await response.text(), "tcp 127.0.0.1");
});

const TSC_IGNORE = ignoreUnless(NODE, TSC);

Deno.test({
  name: testName(
    "public types: a Node consumer type-checks under tsc with @types/node and no Deno types",
    TSC_IGNORE,
  ),
  ignore: !!TSC_IGNORE,
  async fn() {
    // What a Node user gets from JSR's npm compatibility layer: declarations
    // emitted from the sources, in node_modules/@idempotent/http, checked
    // with Node's types only (and skipLibCheck off, tsc's default).
    await using dir = await scratch();
    const pkg = `${dir}/node_modules/@idempotent/http`;
    const exports: Record<string, string> = {
      ".": "mod.ts",
      "./hono": "src/hono.ts",
      "./redis": "src/stores/redis.ts",
      "./postgres": "src/stores/postgres.ts",
      "./failover": "src/stores/failover.ts",
    }; // "./kv" is Deno KV: Deno only.
    const root = new URL("../", import.meta.url).pathname;
    const emit = await run(TSC.path, [
      "--declaration",
      "--emitDeclarationOnly",
      "--noCheck",
      "--allowImportingTsExtensions",
      "--target",
      "es2022",
      "--module",
      "nodenext",
      "--outDir",
      pkg,
      ...Object.values(exports),
    ], root);
    assert.equal(emit.code, 0, emit.stdout + emit.stderr);
    await Deno.writeTextFile(
      `${pkg}/package.json`,
      JSON.stringify({
        name: "@idempotent/http",
        type: "module",
        exports: Object.fromEntries(
          Object.entries(exports).map((
            [name, file],
          ) => [name, { types: `./${file.replace(/\.ts$/, ".d.ts")}` }]),
        ),
      }),
    );
    await Deno.copyFile(
      new URL("./runtimes/node_consumer.ts", import.meta.url),
      `${dir}/consumer.ts`,
    );
    const checked = await run(TSC.path, [
      "--noEmit",
      "--strict",
      "--exactOptionalPropertyTypes",
      "--target",
      "es2022",
      "--lib",
      "es2022",
      "--module",
      "nodenext",
      "--typeRoots",
      `${TOOLS}/node_modules/@types`,
      "--types",
      "node",
      "consumer.ts",
    ], dir);
    assert.equal(checked.stdout + checked.stderr, "", "tsc reports nothing");
    assert.equal(checked.code, 0);
  },
});

// --- Node and Bun -----------------------------------------------------------

const DRIVERS = ["redis", "ioredis", "postgres"];

for (const [runtime, tool] of [["Node", NODE], ["Bun", BUN]] as const) {
  const coreIgnore = ignoreUnless(tool, NPM_PACKAGES);
  Deno.test({
    name: testName(
      `${runtime}: the core's protocol cases pass on MemoryStore`,
      coreIgnore,
    ),
    ignore: !!coreIgnore,
    async fn() {
      await using dir = await scratch();
      await bundle("tests/runtimes/node_main.ts", `${dir}/main.mjs`, DRIVERS);
      assertChecks(
        parseChecks(await run(tool.path, ["main.mjs", "core"], dir)),
        CASES,
      );
    },
  });

  const storesIgnore = ignoreUnless(
    tool,
    NPM_PACKAGES,
    REDIS_IGNORE,
    POSTGRES_IGNORE,
  );
  Deno.test({
    name: testName(
      `${runtime}: RedisStore (node-redis, ioredis) and PostgresStore (postgres.js) pass the protocol cases`,
      storesIgnore,
    ),
    ignore: !!storesIgnore,
    async fn() {
      await using dir = await scratch();
      await bundle("tests/runtimes/node_main.ts", `${dir}/main.mjs`, DRIVERS);
      const prefix = uniquePrefix(`rt_${runtime.toLowerCase()}`);
      assertChecks(
        parseChecks(
          await run(tool.path, [
            "main.mjs",
            "stores",
            REDIS_URL,
            DATABASE_URL,
            prefix,
          ], dir),
        ),
        3 * CASES,
      );
    },
  });
}

// --- workerd ----------------------------------------------------------------

// The core worker has no compatibility flag and an old date: the core needs
// no Node API. The stores worker needs `nodejs_compat` (the drivers' node:net,
// RedisStore's node:crypto and node:buffer) and a date on which workerd has
// node:perf_hooks, which node-redis 5 imports (2026-01-01 lacks it). Outbound
// TCP goes through a network service that allows loopback addresses.
function workerdConfig(corePort: number, storesPort: number, prefix: string) {
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "core", worker = .core),
    (name = "stores", worker = .stores),
    (name = "loopback", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [
    (name = "core", address = "127.0.0.1:${corePort}", http = (), service = "core"),
    (name = "stores", address = "127.0.0.1:${storesPort}", http = (), service = "stores"),
  ],
);

const core :Workerd.Worker = (
  modules = [(name = "core.mjs", esModule = embed "core.mjs")],
  compatibilityDate = "2024-09-23",
);

const stores :Workerd.Worker = (
  modules = [(name = "stores.mjs", esModule = embed "stores.mjs")],
  compatibilityDate = "2026-05-01",
  compatibilityFlags = ["nodejs_compat"],
  bindings = [
    (name = "REDIS_URL", text = ${JSON.stringify(REDIS_URL)}),
    (name = "DATABASE_URL", text = ${JSON.stringify(DATABASE_URL)}),
    (name = "PREFIX", text = ${JSON.stringify(prefix)}),
  ],
  globalOutbound = "loopback",
);
`;
}

async function withWorkerd(
  fn: (core: string, stores: string) => Promise<void>,
): Promise<void> {
  await using dir = await scratch();
  await bundle("tests/runtimes/worker_core.ts", `${dir}/core.mjs`);
  await bundle("tests/runtimes/worker.ts", `${dir}/stores.mjs`);
  // `deno bundle` makes the CommonJS inside npm packages `require` through
  // `createRequire(import.meta.url)`; workerd leaves `import.meta.url`
  // undefined, so give it a file URL.
  const storesBundle = await Deno.readTextFile(`${dir}/stores.mjs`);
  await Deno.writeTextFile(
    `${dir}/stores.mjs`,
    storesBundle.replace(
      "createRequire(import.meta.url)",
      'createRequire(import.meta.url ?? "file:///stores.mjs")',
    ),
  );
  const [corePort, storesPort] = [freePort(), freePort()];
  await Deno.writeTextFile(
    `${dir}/config.capnp`,
    workerdConfig(corePort, storesPort, uniquePrefix("rt_workerd")),
  );
  const child = new Deno.Command(WORKERD.path, {
    args: ["serve", "config.capnp"],
    cwd: dir,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ]);
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  try {
    const core = `http://127.0.0.1:${corePort}`;
    // Wait until it answers (or has exited).
    while (!exited) {
      try {
        await (await fetch(`${core}/ready`)).body?.cancel();
        break;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    if (exited) throw new Error(`workerd exited: ${(await output).join("\n")}`);
    await fn(core, `http://127.0.0.1:${storesPort}`);
  } finally {
    if (!exited) child.kill("SIGTERM");
    await status;
    await output;
  }
}

async function workerChecks(url: string): Promise<Check[]> {
  const response = await fetch(url);
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return JSON.parse(text) as Check[];
}

const WORKERD_IGNORE = ignoreUnless(WORKERD, REDIS_IGNORE, POSTGRES_IGNORE);

Deno.test({
  name: testName(
    "workerd: the core's protocol cases pass without nodejs_compat; RedisStore (node-redis, ioredis) and PostgresStore (postgres.js) pass them with it",
    WORKERD_IGNORE,
  ),
  ignore: !!WORKERD_IGNORE,
  async fn() {
    await withWorkerd(async (core, stores) => {
      assertChecks(await workerChecks(`${core}/core`), CASES);
      assertChecks(await workerChecks(`${stores}/stores`), 3 * CASES);
    });
  },
});

// --- Framework examples -----------------------------------------------------

/** The README's promises, over HTTP, against an example's payments route. */
async function paymentsOverHttp(base: string): Promise<void> {
  const key: string = crypto.randomUUID();
  const pay = (amount: number, idempotencyKey = key) =>
    fetch(`${base}/api/payments`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "idempotency-key": idempotencyKey,
      },
      body: JSON.stringify({ amount }),
    });
  const first = await pay(100);
  const firstBody = await first.text();
  assert.equal(first.status, 201);
  assert.equal(first.headers.get("idempotent-replayed"), null);
  assert.deepEqual(JSON.parse(firstBody), { id: "pay_1", amount: 100 });
  const retry = await pay(100);
  assert.equal(retry.status, 201);
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(await retry.text(), firstBody);
  const reused = await pay(5);
  assert.equal(reused.status, 422);
  await reused.body?.cancel();
  const malformed = await pay(100, "caf\u00e9");
  assert.equal(malformed.status, 400);
  await malformed.body?.cancel();
  const other = await pay(7, `${key}-2`);
  assert.deepEqual(await other.json(), { id: "pay_2", amount: 7 });
}

const HONO_NODE_IGNORE = ignoreUnless(NODE, NPM_PACKAGES);

Deno.test({
  name: testName(
    "examples/hono_node.mjs: Hono on Node (@hono/node-server) replays over HTTP",
    HONO_NODE_IGNORE,
  ),
  ignore: !!HONO_NODE_IGNORE,
  async fn() {
    await using dir = await scratch();
    await bundle("examples/hono_node.mjs", `${dir}/hono_node.mjs`, [
      "hono",
      "@hono/node-server",
    ]);
    await using server = await startServer(NODE.path, ["hono_node.mjs"], {
      cwd: dir,
    });
    await paymentsOverHttp(server.url);
  },
});

Deno.test("examples/oak.ts: Oak (npm @oakserver/oak) behind the middleware replays over HTTP", async () => {
  await using server = await startServer(Deno.execPath(), [
    "run",
    "--allow-net=127.0.0.1",
    "--allow-env",
    "examples/oak.ts",
  ], { cwd: new URL("../", import.meta.url).pathname });
  await paymentsOverHttp(server.url);
});
