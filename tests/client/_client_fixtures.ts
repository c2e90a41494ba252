// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the client tests share: the middleware served over real HTTP, a
 * front that drops responses after the handler ran, an injected sleep that
 * records its waits, and a client on fake time.
 *
 * @module
 */

import { idempotency, type IdempotencyOptions } from "../../mod.ts";
import {
  createIdempotentFetch,
  type IdempotentFetch,
  type IdempotentFetchOptions,
  type IdempotentFetchResult,
} from "../../src/client/client.ts";

/** `handler` behind the middleware, served on loopback (port 0). */
export function serve(
  handler: (req: Request) => Response | Promise<Response>,
  options: Partial<IdempotencyOptions> = {},
): { port: number; url: string } & AsyncDisposable {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    idempotency(handler, { scope: "global", ...options }),
  );
  const { port } = server.addr as Deno.NetAddr;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

/**
 * A TCP front on loopback that forwards each connection to `targetPort`.
 * For the first `drops` connections it forwards the request, waits for the
 * first bytes of the response (the handler ran, the answer is on its way)
 * and then closes the client's connection without sending them: the case a
 * client cannot tell from a lost request.
 */
export function droppingFront(
  targetPort: number,
  drops: number,
): { port: number; dropped: () => number } & AsyncDisposable {
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
  const accepting = (async () => {
    for await (const client of listener) {
      open.add(client);
      const upstream = await Deno.connect({
        hostname: "127.0.0.1",
        port: targetPort,
      });
      open.add(upstream);
      const drop = left-- > 0;
      client.readable.pipeTo(upstream.writable).catch(() => {});
      if (!drop) {
        upstream.readable.pipeTo(client.writable).catch(() => {});
        continue;
      }
      const reader = upstream.readable.getReader();
      reader.read().then(() => {
        dropped++;
        reader.releaseLock();
        close(client);
        close(upstream);
      }, () => {});
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    dropped: () => dropped,
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const conn of [...open]) close(conn);
      await accepting;
    },
  };
}

/** An injected sleep that records each wait and runs `then` (once per wait). */
export function recordingSleep(
  then: (ms: number) => unknown = () => {},
): { waits: number[]; sleep: (ms: number) => Promise<void> } {
  const waits: number[] = [];
  return {
    waits,
    sleep: async (ms: number) => {
      waits.push(ms);
      await then(ms);
    },
  };
}

/**
 * A client on fake time, in process: `answer` gives each attempt's response
 * (or throws, a network error); `sleep` moves the clock on by its wait.
 */
export function fakeClient(
  answer: (attempt: number) => Response,
  options: IdempotentFetchOptions = {},
): {
  post: (
    init?: Parameters<IdempotentFetch>[1],
  ) => Promise<IdempotentFetchResult>;
  waits: number[];
  calls: () => number;
} {
  let now = 1_000_000;
  const waits: number[] = [];
  let calls = 0;
  const send = createIdempotentFetch({
    fetch: () => answer(++calls),
    clock: () => now,
    sleep: (ms) => Promise.resolve(void (waits.push(ms), now += ms)),
    random: () => 0,
    ...options,
  });
  const post = (init: Parameters<typeof send>[1] = {}) =>
    send("http://api.test/payments", { method: "POST", body: "{}", ...init });
  return { post, waits, calls: () => calls };
}
