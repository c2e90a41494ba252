// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The server side of `bench/http_compare.ts`: one small JSON handler on
 * `Deno.serve`, bare or under the middleware.
 *
 *     deno run --allow-net=127.0.0.1 bench/_http_server.ts bare|guarded PORT
 *
 * @module
 */
import { idempotency } from "../mod.ts";
import { handler } from "./_app.ts";

const [mode = "bare", port = "8711"] = Deno.args;
Deno.serve(
  { hostname: "127.0.0.1", port: Number(port), onListen() {} },
  mode === "bare" ? handler : idempotency(handler),
);
