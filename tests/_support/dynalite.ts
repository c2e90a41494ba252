// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A dynalite of the test's own ({@linkcode startDynalite}): its own process
 * (`dynalite_server.ts`) on a free port, so that a test can pause, kill and
 * restart it; stopped in `finally` or by `await using`. The AWS SDK talks to
 * it over HTTP on 127.0.0.1 with dummy credentials.
 *
 * @module
 */

import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { freePort, listening } from "./http.ts";
import { waitFor } from "./time.ts";

const SERVER = new URL("./dynalite_server.ts", import.meta.url).pathname;

/** A dynalite started by a test: see {@linkcode startDynalite}. */
export interface PrivateDynalite extends AsyncDisposable {
  readonly port: number;
  readonly endpoint: string;
  /** A client of its own, with `maxAttempts` (default 3, the SDK's) and middleware counting each HTTP request (each retry too) by operation. */
  client(maxAttempts?: number): DynamoDBClient & { sent: string[] };
  /** SIGSTOP: it hangs, holding what was sent to it. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** SIGKILL; waits for the process to end. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty (dynalite keeps nothing). */
  restart(): Promise<void>;
  /** The next `n` requests answer `ThrottlingException` (not `plain`). */
  throttle(n: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts dynalite on a free port; `plain`: as published, without what
 * `dynalite_server.ts` adds (`ReturnValuesOnConditionCheckFailure`, TTL
 * settings, throttling).
 */
export async function startDynalite(
  options: { plain?: boolean } = {},
): Promise<PrivateDynalite> {
  let port = freePort();
  let child: Deno.ChildProcess | undefined;
  const clients: DynamoDBClient[] = [];
  const spawn = async () => {
    const args = ["run", "--allow-all", SERVER, String(port)];
    if (options.plain) args.push("--plain");
    const started = child = new Deno.Command(Deno.execPath(), {
      args,
      stdout: "null",
      stderr: "null",
    }).spawn();
    let exited = false;
    started.status.then(() => exited = true);
    await waitFor(`dynalite on ${port}`, async () => {
      if (exited) throw new Error(`dynalite on ${port} exited`);
      return await listening(port);
    }, 60_000);
  };
  const signal = (name: Deno.Signal) => {
    try {
      child?.kill(name);
    } catch { /* gone */ }
  };
  const kill = async () => {
    const c = child;
    child = undefined;
    if (c === undefined) return;
    try {
      c.kill("SIGCONT");
      c.kill("SIGKILL");
    } catch { /* gone */ }
    await c.status;
  };
  const stop = async () => {
    for (const client of clients) client.destroy();
    await kill();
  };
  for (let attempt = 1;; attempt++) {
    try {
      await spawn();
      break;
    } catch (error) {
      await kill();
      if (attempt === 3) throw error;
      port = freePort();
    }
  }
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    port,
    endpoint,
    client(maxAttempts = 3) {
      const client = new DynamoDBClient({
        endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "test", secretAccessKey: "test" },
        maxAttempts,
        // The SDK's own reads os.release(): the test task allows no --allow-sys.
        defaultUserAgentProvider: () => Promise.resolve([["idempotent-tests"]]),
      }) as DynamoDBClient & { sent: string[] };
      client.sent = [];
      client.middlewareStack.add((next, context) => (args) => {
        client.sent.push(String(context.commandName).replace(/Command$/, ""));
        return next(args);
      }, { step: "deserialize", name: "countRequests" });
      clients.push(client);
      return client;
    },
    pause: () => signal("SIGSTOP"),
    resume: () => signal("SIGCONT"),
    kill,
    async restart() {
      await kill();
      await spawn();
    },
    async throttle(n: number) {
      const response = await fetch(`${endpoint}/__throttle?n=${n}`, {
        method: "POST",
      });
      await response.body?.cancel();
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
