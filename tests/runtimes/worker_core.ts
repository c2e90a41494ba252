// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The core's smoke run on workerd, without `nodejs_compat` (bundled by
 * tests/runtimes_test.ts): `GET /core` answers the protocol checks on
 * MemoryStore; any other path answers 404 (the test polls it until workerd
 * is up).
 *
 * @module
 */
import { protocolCases } from "./smoke.ts";

export default {
  async fetch(request: Request): Promise<Response> {
    if (new URL(request.url).pathname !== "/core") {
      return new Response("not found", { status: 404 });
    }
    return Response.json(await protocolCases("MemoryStore"));
  },
};
