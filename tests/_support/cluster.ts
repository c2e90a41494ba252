// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A private Redis Cluster for the tests: 3 masters and 3 replicas on free
 * loopback ports, each `redis-server` in cluster mode in a temp dir, joined
 * with `redis-cli --cluster create … --cluster-replicas 1`. It is ready when
 * every node answers `cluster_state:ok` with all 16384 slots assigned, the
 * nodes agree on who serves which slot, and every master sees its replica
 * online (synced). {@linkcode PrivateCluster.stop}
 * kills every process it started and removes the temp dir; a failed start
 * does the same before it throws.
 *
 * By hand: `deno task cluster` starts one, prints its ports and waits for
 * Ctrl-C.
 *
 * @module
 */

import { freePort, REQUIRE_SERVICES } from "./services.ts";

/** One node of a private cluster. */
export interface ClusterNode {
  /** Its port on 127.0.0.1. */
  readonly port: number;
  /** Its process, until killed. */
  child: Deno.ChildProcess | undefined;
}

/** What `CLUSTER NODES` says about one node. */
export interface NodeInfo {
  id: string;
  port: number;
  role: "master" | "slave";
  /** The id of its master (replicas). */
  masterId: string | null;
  /** Failed, or a handshake: not usable. */
  failed: boolean;
  /** The slot ranges it serves, as [first, last]. */
  slots: [number, number][];
}

/** Whether both `redis-server` and `redis-cli` are on the PATH. */
export async function haveClusterTools(): Promise<boolean> {
  for (const program of ["redis-server", "redis-cli"]) {
    try {
      const { success } = await new Deno.Command(program, {
        args: ["--version"],
        stdout: "null",
        stderr: "null",
      }).output();
      if (!success) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/**
 * Whether the cluster tests are ignored, and why: `false` when the tools are
 * there or IDEMPOTENCY_REQUIRE_SERVICES=1 makes them required.
 */
export const CLUSTER_IGNORE: false | string =
  REQUIRE_SERVICES || await haveClusterTools()
    ? false
    : "redis-server or redis-cli is not installed (IDEMPOTENCY_REQUIRE_SERVICES=1 makes this a failure)";

const decoder = new TextDecoder();

/** Polls `check` until it holds; the bound only fails a broken run. */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  ms = 30_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A private cluster: see {@linkcode startCluster}. */
export class PrivateCluster {
  readonly nodes: ClusterNode[];
  readonly dir: string;
  readonly nodeTimeoutMs: number;

  constructor(dir: string, ports: number[], nodeTimeoutMs: number) {
    this.dir = dir;
    this.nodes = ports.map((port) => ({ port, child: undefined }));
    this.nodeTimeoutMs = nodeTimeoutMs;
  }

  /** The ports of the nodes still running. */
  get livePorts(): number[] {
    return this.nodes.filter((n) => n.child !== undefined).map((n) => n.port);
  }

  /** Startup nodes for a cluster client: every node. */
  get rootNodes(): { host: string; port: number }[] {
    return this.nodes.map((n) => ({ host: "127.0.0.1", port: n.port }));
  }

  /** Starts the server of one node (again, after a kill: its nodes.conf stays). */
  spawn(node: ClusterNode): void {
    node.child = new Deno.Command("redis-server", {
      args: [
        "--port",
        String(node.port),
        "--bind",
        "127.0.0.1",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        `nodes-${node.port}.conf`,
        "--cluster-node-timeout",
        String(this.nodeTimeoutMs),
        "--dir",
        this.dir,
        "--save",
        "",
        "--appendonly",
        "no",
        // A replica syncs at once, not after the default 5 s of waiting for
        // other replicas to share the transfer.
        "--repl-diskless-sync-delay",
        "0",
        "--daemonize",
        "no",
      ],
      stdout: "null",
      stderr: "null",
    }).spawn();
  }

  /**
   * Runs `redis-cli -p PORT args…` and answers its output; throws when it
   * fails or answers an error.
   */
  async cli(port: number, ...args: string[]): Promise<string> {
    const out = await new Deno.Command("redis-cli", {
      args: ["-h", "127.0.0.1", "-p", String(port), ...args],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = decoder.decode(out.stdout).trim();
    if (!out.success || /^(ERR|\(error\))/.test(text)) {
      throw new Error(
        `redis-cli -p ${port} ${args.join(" ")}: ${text} ${
          decoder.decode(out.stderr)
        }`,
      );
    }
    return text;
  }

  /** `CLUSTER NODES` as seen from `port`. */
  async topology(port: number): Promise<NodeInfo[]> {
    const text = await this.cli(port, "CLUSTER", "NODES");
    return text.split("\n").filter((l) => l.trim()).map((line) => {
      const [id, addr, flags, master, , , , , ...slots] = line.split(" ");
      const f = flags!.split(",");
      return {
        id: id!,
        port: Number(/:(\d+)@/.exec(addr!)?.[1]),
        role: f.includes("master") ? "master" : "slave",
        masterId: master === "-" ? null : master!,
        failed: f.includes("fail") || f.includes("handshake") ||
          f.includes("noaddr"),
        slots: slots.filter((s) => !s.startsWith("[")).map((s) => {
          const [a, b] = s.split("-");
          return [Number(a), Number(b ?? a)] as [number, number];
        }),
      };
    });
  }

  /** Whether every live node says cluster_state:ok, with all slots ok. */
  async healthy(): Promise<boolean> {
    for (const port of this.livePorts) {
      let info: string;
      try {
        info = await this.cli(port, "CLUSTER", "INFO");
      } catch {
        return false;
      }
      if (
        !info.includes("cluster_state:ok") ||
        !info.includes("cluster_slots_ok:16384")
      ) return false;
    }
    return true;
  }

  /**
   * Waits until every live node says cluster_state:ok with all slots ok,
   * agrees on who serves which slot, and sees every master with a replica
   * (when `replicas`).
   */
  async ready(replicas = true): Promise<void> {
    await waitUntil("the cluster to be ok on every node", async () => {
      if (!(await this.healthy())) return false;
      const views = await Promise.all(
        this.livePorts.map((p) => this.topology(p).catch(() => null)),
      );
      let reference: string | undefined;
      for (const view of views) {
        if (view === null) return false;
        const live = view.filter((n) => !n.failed);
        const owners = live.filter((n) => n.role === "master" && n.slots.length)
          .map((n) => `${n.port}:${JSON.stringify(n.slots)}`).sort().join();
        reference ??= owners;
        if (owners !== reference) return false;
        if (replicas) {
          for (const m of live.filter((n) => n.role === "master")) {
            if (!live.some((r) => r.masterId === m.id)) return false;
          }
        }
      }
      if (replicas) {
        // Named in CLUSTER NODES is not yet replicating: each master must
        // see its replica online (synced), or WAIT would count none.
        const masters = views[0]!.filter((n) =>
          !n.failed && n.role === "master" && n.slots.length
        );
        for (const m of masters) {
          const info = await this.cli(m.port, "INFO", "replication")
            .catch(() => "");
          if (!/slave0:.*state=online/.test(info)) return false;
        }
      }
      return true;
    }, 60_000);
  }

  /** The masters and, for each, its replica (as the first live node sees it). */
  async pairs(): Promise<{ master: NodeInfo; replica: NodeInfo }[]> {
    const view = await this.topology(this.livePorts[0]!);
    const live = view.filter((n) => !n.failed);
    return live.filter((n) => n.role === "master" && n.slots.length).map((
      master,
    ) => ({
      master,
      replica: live.find((r) => r.masterId === master.id)!,
    }));
  }

  /** Kills one node at once (SIGKILL), as a crash would; waits for the exit. */
  async kill(port: number): Promise<void> {
    const node = this.nodes.find((n) => n.port === port);
    const child = node?.child;
    if (node === undefined || child === undefined) return;
    node.child = undefined;
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
  }

  /** Kills every node and removes the temp dir. Idempotent. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.kill(n.port)));
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }

  /** Same as {@linkcode PrivateCluster.stop}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}

async function listening(port: number): Promise<boolean> {
  try {
    (await Deno.connect({ hostname: "127.0.0.1", port })).close();
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts a private cluster of 3 masters and 3 replicas and waits until it is
 * ready. Use with `await using`, or call `stop()` in `finally`.
 *
 * @param options The cluster node timeout (how soon a dead master is
 * failed over), in ms.
 * @returns The running cluster.
 */
export async function startCluster(
  options: { nodeTimeoutMs?: number } = {},
): Promise<PrivateCluster> {
  // A port picked free may be taken before redis-server binds it (other
  // tests pick ports too): a node that exits before it listens makes the
  // whole start again, on fresh ports.
  for (let attempt = 1;; attempt++) {
    try {
      return await startOnce(options.nodeTimeoutMs ?? 500);
    } catch (error) {
      if (!(error instanceof PortTaken) || attempt === 3) throw error;
    }
  }
}

class PortTaken extends Error {}

async function startOnce(nodeTimeoutMs: number): Promise<PrivateCluster> {
  const dir = await Deno.makeTempDir({ prefix: "idem-cluster-" });
  // Cluster nodes also listen on port + 10000: pick ports with that free too.
  const ports: number[] = [];
  while (ports.length < 6) {
    const port = freePort();
    if (port > 55_000 || ports.includes(port)) continue;
    try {
      Deno.listen({ hostname: "127.0.0.1", port: port + 10_000 }).close();
    } catch {
      continue;
    }
    ports.push(port);
  }
  const cluster = new PrivateCluster(dir, ports, nodeTimeoutMs);
  try {
    for (const node of cluster.nodes) cluster.spawn(node);
    for (const node of cluster.nodes) {
      let exited = false;
      node.child!.status.then(() => exited = true);
      await waitUntil(`redis-server on ${node.port}`, async () => {
        if (exited) throw new PortTaken(`redis-server on ${node.port} exited`);
        return await listening(node.port);
      });
    }
    await cluster.cli(
      ports[0]!,
      "--cluster",
      "create",
      ...ports.map((p) => `127.0.0.1:${p}`),
      "--cluster-replicas",
      "1",
      "--cluster-yes",
    );
    await cluster.ready();
    return cluster;
  } catch (error) {
    await cluster.stop();
    throw error;
  }
}

if (import.meta.main) {
  const cluster = await startCluster();
  const stop = async () => {
    await cluster.stop();
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  const pairs = await cluster.pairs();
  // deno-lint-ignore no-console
  console.log(
    [
      `Redis Cluster ready in ${cluster.dir}`,
      ...pairs.map(({ master, replica }) =>
        `  master 127.0.0.1:${master.port} (slots ${
          master.slots.map(([a, b]) => `${a}-${b}`).join(",")
        }), replica 127.0.0.1:${replica.port}`
      ),
      `  redis-cli -c -p ${pairs[0]!.master.port}`,
      "Ctrl-C stops it and removes its files.",
    ].join("\n"),
  );
}
