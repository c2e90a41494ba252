// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The server side of `bench/http_compare.ts`: one small JSON handler on
 * `Deno.serve`, bare, under the middleware, or under the floor of what the
 * middleware must do to a new key (see {@linkcode floor}) or to a replay
 * (see {@linkcode replayFloor}).
 *
 *     deno run --allow-net=127.0.0.1 bench/_http_server.ts bare|guarded|floor|replay-floor|keyless-floor PORT
 *
 * @module
 */
import { idempotency } from "../mod.ts";
import { readBody, rebuild } from "../src/_request.ts";
import { replay, responseBody, storedHeaders } from "../src/_response.ts";
import { bodyInit } from "../src/_bytes.ts";
import { handler, record } from "./_app.ts";

const NONE = new Set<string>();

/** A capture's `stop` that never comes. */
const never = () => new Promise<void>(() => {});

/**
 * What a new key costs the platform, without a hash or a store: the body
 * read and bounded as the middleware reads it (whole, by its
 * `Content-Length`), the request rebuilt around it, the response's body read
 * as the middleware reads it (whole, held in memory), and the live response
 * built from the bytes read.
 */
async function floor(request: Request): Promise<Response> {
  const body = await readBody(request, 1_048_576);
  if (!(body instanceof Uint8Array)) throw new Error("unread body");
  const response = await handler(rebuild(request, body));
  const { status, statusText } = response;
  const { pairs, typed } = storedHeaders(response.headers, NONE);
  const captured = await responseBody(response, 1_048_576, never);
  if (captured?.outcome !== "within") throw new Error("not captured");
  return new Response(bodyInit(captured.bytes, typed), {
    status,
    statusText,
    headers: pairs,
  });
}

/**
 * What a replay costs the platform, without a hash or a store: its key's
 * header read (which makes `Deno.serve` copy the header list), the body
 * read and bounded as the middleware reads it (a replay must read it, to
 * compare its fingerprint), and the replay built from a record in memory as the
 * middleware builds it.
 */
async function replayFloor(request: Request): Promise<Response> {
  request.headers.get("idempotency-key");
  const body = await readBody(request, 1_048_576);
  if (!(body instanceof Uint8Array)) throw new Error("unread body");
  return replay(record, "idempotent-replayed", NONE);
}

/**
 * What a request without a key costs the platform beyond the bare app: its
 * method and its `Idempotency-Key` header read, which is all the middleware
 * does with it (reading a header makes `Deno.serve` copy the header list).
 */
function keylessFloor(request: Request): Promise<Response> {
  if (request.method === "POST") request.headers.get("idempotency-key");
  return handler(request);
}

const [mode = "bare", port = "8711"] = Deno.args;
Deno.serve(
  { hostname: "127.0.0.1", port: Number(port), onListen() {} },
  mode === "bare"
    ? handler
    : mode === "floor"
    ? floor
    : mode === "replay-floor"
    ? replayFloor
    : mode === "keyless-floor"
    ? keylessFloor
    : idempotency(handler, { scope: "global" }),
);
