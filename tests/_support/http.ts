// Copyright 2026 the @idempotent/http authors. MIT license.
/** HTTP in tests: keyed requests, local servers, free ports, app processes. @module */

import { waitFor } from "./time.ts";

/** A POST with an idempotency key (unless `key` is null) and a body. */
export function post(
  key: string | null,
  body: string | Uint8Array<ArrayBuffer> = "{}",
  init: { path?: string; headers?: Record<string, string>; method?: string } =
    {},
): Request {
  const headers = new Headers(init.headers);
  if (key !== null) headers.set("idempotency-key", key);
  return new Request(`http://api.test${init.path ?? "/payments"}`, {
    method: init.method ?? "POST",
    headers,
    body,
  });
}

/**
 * POSTs a body with an idempotency key over the network, with `fetch`.
 *
 * @param url Where to.
 * @param key The idempotency key.
 * @param body The body.
 * @returns The response.
 */
export function fetchPost(
  url: string,
  key: string,
  body = "{}",
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "idempotency-key": key },
    body,
  });
}

/** A `Deno.serve` of a test: see {@linkcode serveLocal}. */
export interface LocalServer extends AsyncDisposable {
  /** Its loopback port. */
  readonly port: number;
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Every error that escaped the handler to `onError` (answered 500). */
  readonly escaped: unknown[];
  /** Stops it; also what disposing it does. */
  shutdown(): Promise<void>;
}

/**
 * Serves `handler` on a free loopback port, answering 500 to (and keeping)
 * any error that escapes it. Stop it with `shutdown()` or `await using`.
 *
 * @param handler The fetch handler.
 * @returns The running server.
 */
export function serveLocal(
  handler: (request: Request) => Response | Promise<Response>,
): LocalServer {
  const escaped: unknown[] = [];
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen() {},
    onError(error) {
      escaped.push(error);
      return new Response("server error", { status: 500 });
    },
  }, handler);
  const { port } = server.addr;
  const shutdown = () => server.shutdown();
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    escaped,
    shutdown,
    [Symbol.asyncDispose]: shutdown,
  };
}

/**
 * A loopback port nobody listens on at the time of asking.
 *
 * @returns The port.
 */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/**
 * Whether something accepts TCP connections on a loopback port.
 *
 * @param port The port.
 * @returns Whether a connection opened.
 */
export async function listening(port: number): Promise<boolean> {
  try {
    (await Deno.connect({ hostname: "127.0.0.1", port })).close();
    return true;
  } catch {
    return false;
  }
}

/**
 * Spawns `count` processes of `deno run` (net, env and read allowed, plus
 * `flags`) of `script`, each with the arguments `args` gives for a free port
 * of its own, and waits until every one listens on its port; stops them all
 * (SIGTERM) if one does not. `stop` does the same after the test.
 */
export async function spawnApps(
  script: URL,
  count: number,
  args: (port: number, i: number) => string[],
  env: Record<string, string>,
  flags: string[] = [],
): Promise<{ ports: number[]; stop: () => Promise<void> }> {
  const ports = Array.from({ length: count }, () => freePort());
  const children = ports.map((port, i) =>
    new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-net",
        "--allow-env",
        "--allow-read",
        ...flags,
        script.pathname,
        ...args(port, i),
      ],
      env,
      stdout: "null",
      stderr: "inherit",
    }).spawn()
  );
  const stop = async () => {
    for (const child of children) {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
    }
  };
  try {
    await Promise.all(
      ports.map((port) =>
        waitFor(`the app on port ${port}`, () => listening(port))
      ),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { ports, stop };
}

/** A TCP proxy of a test: see {@linkcode droppingProxy}. */
export interface DroppingProxy extends AsyncDisposable {
  /** Its loopback port. */
  readonly port: number;
  /** How many responses it dropped so far. */
  readonly dropped: number;
}

/**
 * A TCP proxy in front of a loopback `target` port that drops the first
 * `drops` responses: it forwards the request, waits for the app's first
 * response bytes (so the app has answered, its record written) and closes
 * both connections instead of sending them on, as a load balancer that
 * times out or a network that breaks does. Every later connection is
 * forwarded both ways.
 */
export function droppingProxy(target: number, drops = 1): DroppingProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  let left = drops;
  let dropped = 0;
  const close = (conn: Deno.Conn) => {
    open.delete(conn);
    try {
      conn.close();
    } catch { /* closed already */ }
  };
  const relay = async (client: Deno.Conn) => {
    const app = await Deno.connect({ hostname: "127.0.0.1", port: target });
    open.add(client).add(app);
    const drop = left > 0;
    if (drop) left--;
    client.readable.pipeTo(app.writable).catch(() => {});
    if (!drop) {
      await app.readable.pipeTo(client.writable).catch(() => {});
    } else {
      await app.readable.getReader().read().catch(() => {});
      dropped++;
    }
    close(client);
    close(app);
  };
  const accepting = (async () => {
    try {
      for await (const client of listener) void relay(client);
    } catch { /* closed */ }
  })();
  const { port } = listener.addr as Deno.NetAddr;
  return {
    port,
    get dropped() {
      return dropped;
    },
    async [Symbol.asyncDispose]() {
      listener.close();
      await accepting;
      for (const conn of [...open]) close(conn);
    },
  };
}
