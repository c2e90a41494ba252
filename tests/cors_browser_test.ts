// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * A real browser reads the middleware's headers cross-origin: headless
 * Chromium (Debian's, `/usr/bin/chromium` or `CHROMIUM`) loads a page served
 * on one port whose script `fetch`es a `Deno.serve` app with the middleware
 * on another, preflight included (`Access-Control-Allow-Headers:
 * Idempotency-Key`), and posts what it read back to the page's server.
 *
 * - The CORS wrapper outside the middleware (docs/cors.md): the replay's
 *   `Idempotent-Replayed: true` is readable, and so is the 422 problem.
 * - The same app with our `Access-Control-Expose-Headers` line removed: the
 *   browser hides the header (`null`), so the first arm reads it because we
 *   exposed it.
 * - A credentialed request to a handler that exposes `*` itself: under
 *   credentials `*` is a name, so only our listing beside it lets the page
 *   read the replay header.
 *
 * Ignored, with the reason, when Chromium is missing; with
 * `IDEMPOTENCY_REQUIRE_SERVICES=1` it runs and fails instead.
 *
 * @module
 */

import assert from "node:assert/strict";
import { idempotency, MemoryStore } from "../mod.ts";
import { integrationTest, REQUIRE_SERVICES } from "./_support/services.ts";
import { type LocalServer, serveLocal } from "./_support/http.ts";
import { deferred } from "./_support/time.ts";

const CHROMIUM = Deno.env.get("CHROMIUM") ?? "/usr/bin/chromium";
const HAVE_CHROMIUM = await Deno.stat(CHROMIUM).then(() => true, () => false);
const IGNORE: false | string = REQUIRE_SERVICES || HAVE_CHROMIUM
  ? false
  : `Chromium is not installed at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM; IDEMPOTENCY_REQUIRE_SERVICES=1 makes this a failure)`;

/** The flags Chromium needs on a machine with a closed network, as root. */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** What the page read from one `fetch`. */
interface Read {
  status: number;
  replayed: string | null;
  body: string;
}

/**
 * The app as docs/cors.md wires `Deno.serve`: the preflight answered and
 * `Access-Control-Allow-Origin` added outside the middleware; `strip` then
 * removes our expose line (the control arm).
 */
function app(page: () => string, strip: boolean): LocalServer {
  let orders = 0;
  const api = idempotency(() => {
    orders++;
    return Response.json({ order: orders }, { status: 201 });
  }, { scope: "global", store: new MemoryStore() });
  return serveLocal(async (request) => {
    const cors = { "access-control-allow-origin": page() };
    if (request.method === "OPTIONS") {
      return new Response(null, {
        status: 204,
        headers: {
          ...cors,
          "access-control-allow-methods": "POST",
          "access-control-allow-headers": "Idempotency-Key, Content-Type",
        },
      });
    }
    const response = await api(request);
    const out = new Response(response.body, response);
    out.headers.set(
      "access-control-allow-origin",
      cors[
        "access-control-allow-origin"
      ],
    );
    if (strip) out.headers.delete("access-control-expose-headers");
    return out;
  });
}

/** A handler doing CORS itself, credentials allowed, exposing `*`. */
function credentialed(page: () => string): LocalServer {
  const cors = () => ({
    "access-control-allow-origin": page(),
    "access-control-allow-credentials": "true",
  });
  const api = idempotency(
    () =>
      Response.json({ ok: true }, {
        headers: { ...cors(), "access-control-expose-headers": "*" },
      }),
    { scope: "global", store: new MemoryStore() },
  );
  return serveLocal((request) =>
    request.method === "OPTIONS"
      ? new Response(null, {
        status: 204,
        headers: {
          ...cors(),
          "access-control-allow-methods": "POST",
          "access-control-allow-headers": "Idempotency-Key, Content-Type",
        },
      })
      : api(request)
  );
}

/** The page's script: each arm's requests, in order, then the result posted home. */
function pageHtml(apis: { exposed: string; stripped: string; star: string }) {
  const script = `
const post = async (base, key, body, credentials = "same-origin") => {
  const r = await fetch(base + "/orders", {
    method: "POST",
    credentials,
    headers: { "Idempotency-Key": key, "Content-Type": "application/json" },
    body,
  });
  return { status: r.status, replayed: r.headers.get("Idempotent-Replayed"), body: await r.text() };
};
const out = {};
try {
  const apis = ${JSON.stringify(apis)};
  out.first = await post(apis.exposed, "k1", '{"n":1}');
  out.replay = await post(apis.exposed, "k1", '{"n":1}');
  out.reused = await post(apis.exposed, "k1", '{"n":2}');
  out.strippedFirst = await post(apis.stripped, "k2", '{"n":1}');
  out.strippedReplay = await post(apis.stripped, "k2", '{"n":1}');
  out.starFirst = await post(apis.star, "k3", "{}", "include");
  out.starReplay = await post(apis.star, "k3", "{}", "include");
} catch (error) {
  out.error = String(error);
}
await fetch("/result", { method: "POST", body: JSON.stringify(out) });
`;
  return `<!doctype html><title>cors</title><script type="module">${script}</script>`;
}

integrationTest(
  "headless Chromium reads Idempotent-Replayed on a cross-origin replay, and a 422, only because the middleware exposed it",
  IGNORE,
  async () => {
    const result = deferred<Record<string, Read | string>>();
    let pageOrigin = "";
    const origin = () => pageOrigin;
    await using exposed = app(origin, false);
    await using stripped = app(origin, true);
    await using star = credentialed(origin);
    const html = pageHtml({
      exposed: exposed.url,
      stripped: stripped.url,
      star: star.url,
    });
    await using page = serveLocal(async (request) => {
      if (new URL(request.url).pathname === "/result") {
        result.resolve(await request.json());
        return new Response("thanks");
      }
      return new Response(html, {
        headers: { "content-type": "text/html; charset=utf-8" },
      });
    });
    pageOrigin = page.url;
    const profile = await Deno.makeTempDir({ prefix: "cors_chromium_" });
    const browser = new Deno.Command(CHROMIUM, {
      args: [...FLAGS, `--user-data-dir=${profile}`, `${page.url}/`],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    let stderr = "";
    const drained = browser.stderr.pipeThrough(new TextDecoderStream())
      .pipeTo(
        new WritableStream({
          write: (chunk) => void (stderr = (stderr + chunk).slice(-4_000)),
        }),
      ).catch(() => {});
    // Only a bound, so that a page that never reports fails instead of hanging.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no result from the page; Chromium: ${stderr}`)),
        120_000,
      );
    });
    const exited = browser.status.then((status) => {
      throw new Error(`Chromium exited (${status.code}) first: ${stderr}`);
    });
    let out: Record<string, Read | string>;
    try {
      out = await Promise.race([result.promise, exited, bound]);
    } finally {
      clearTimeout(timer);
      try {
        browser.kill("SIGTERM");
      } catch {
        // Already gone.
      }
      await browser.status;
      await drained;
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    }
    assert.equal(out.error, undefined, `the page threw: ${out.error}`);
    const read = (name: string) => out[name] as Read;
    assert.equal(read("first").status, 201);
    assert.equal(read("first").replayed, null);
    assert.equal(read("replay").status, 201);
    assert.equal(read("replay").replayed, "true");
    assert.equal(read("replay").body, read("first").body);
    assert.equal(read("reused").status, 422);
    assert.match(read("reused").body, /problem-key-reused/);
    // Without our line the browser hides the very same header.
    assert.equal(read("strippedReplay").status, 201);
    assert.equal(read("strippedReplay").body, read("strippedFirst").body);
    assert.equal(read("strippedReplay").replayed, null);
    // Credentialed, beside the handler's *.
    assert.equal(read("starReplay").status, 200);
    assert.equal(read("starReplay").replayed, "true");
  },
);
