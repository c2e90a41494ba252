// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The protocol cases every runtime runs (tests/runtimes_test.ts bundles this
 * with each runtime's entry): first call, replay with the marker and the same
 * bytes, 409 while in flight, 422 for another payload, 400 for a malformed
 * key; a body-keyed JSON delivery (`key`, `jsonFingerprint`) written anew
 * replays, and RFC 8785's sample fingerprints as its canonical form; a sealed record replays, and another key list cannot open it. Web platform only, so Node, Bun and workerd all run it as it is.
 *
 * Each case is reported as `{ name, expected, actual }`; the Deno side
 * compares them, so a failure names the case and shows both values.
 *
 * @module
 */
import {
  idempotency,
  type IdempotencyStore,
  importEncryptionKeys,
  jsonFingerprint,
  MemoryStore,
  requestFingerprint,
} from "@idempotent/http";

/** One case's outcome, as the runtime saw it. */
export interface Check {
  /** The store and the case. */
  name: string;
  /** What the protocol promises. */
  expected: unknown;
  /** What the runtime answered. */
  actual: unknown;
}

/**
 * Runs the protocol cases against one store on the current runtime.
 *
 * @param label The store's name, for the checks' names.
 * @param store The store under test (fresh, or keyed apart by the caller).
 * @returns One check per promise of the protocol.
 */
export async function protocolCases(
  label: string,
  store: IdempotencyStore = new MemoryStore(),
): Promise<Check[]> {
  const checks: Check[] = [];
  const check = (name: string, expected: unknown, actual: unknown) =>
    checks.push({ name: `${label}: ${name}`, expected, actual });

  let runs = 0;
  let entered: () => void = () => {};
  let release: () => void = () => {};
  const gate = { entered: Promise.resolve(), released: Promise.resolve() };
  const handler = idempotency(async (request) => {
    runs++;
    if (new URL(request.url).pathname === "/slow") {
      entered();
      await gate.released;
    }
    const { amount } = await request.json() as { amount: number };
    return new Response(JSON.stringify({ charged: amount, run: runs }), {
      status: 201,
      headers: { "content-type": "application/json" },
    });
  }, { scope: "global", store });

  const key = `smoke-${crypto.randomUUID()}`;
  const pay = (path: string, idempotencyKey: string, amount: number) =>
    handler(
      new Request(`http://localhost${path}`, {
        method: "POST",
        headers: { "idempotency-key": idempotencyKey },
        body: JSON.stringify({ amount }),
      }),
    );
  const answer = async (response: Response) => ({
    status: response.status,
    replayed: response.headers.get("idempotent-replayed"),
    type: response.headers.get("content-type"),
    body: await response.text(),
  });

  const first = await answer(await pay("/pay", key, 100));
  check("first call runs the handler", {
    status: 201,
    replayed: null,
    type: "application/json",
    body: '{"charged":100,"run":1}',
  }, first);

  const replay = await answer(await pay("/pay", key, 100));
  check("a retry replays the same bytes with the marker", {
    ...first,
    replayed: "true",
  }, replay);
  check("a replay does not run the handler", 1, runs);

  const reused = await answer(await pay("/pay", key, 999));
  check("another payload under the key is 422", {
    status: 422,
    type: "application/problem+json",
  }, { status: reused.status, type: reused.type });

  const malformed = await answer(await pay("/pay", "caf\u00e9", 100));
  check("a malformed key is 400", {
    status: 400,
    type: "application/problem+json",
  }, { status: malformed.status, type: malformed.type });

  gate.entered = new Promise((resolve) => entered = resolve);
  gate.released = new Promise((resolve) => release = resolve);
  const slowKey = `${key}-slow`;
  const slow = pay("/slow", slowKey, 5);
  await gate.entered;
  const during = await pay("/slow", slowKey, 5);
  check("a retry while the first runs is 409 with Retry-After", {
    status: 409,
    retryAfter: true,
  }, {
    status: during.status,
    retryAfter: /^\d+$/.test(during.headers.get("retry-after") ?? ""),
  });
  await during.body?.cancel();
  release();
  const slowAnswer = await answer(await slow);
  check("the first request still completes", 201, slowAnswer.status);
  check("the handler ran once per key", 2, runs);

  // The `key` option and jsonFingerprint: a webhook redelivered, written anew.
  let hooks = 0;
  const hook = idempotency(() => new Response(`hook ${++hooks}`), {
    scope: "global",
    store,
    key: (_request, body) => JSON.parse(new TextDecoder().decode(body)).id,
    fingerprint: jsonFingerprint,
  });
  const deliver = async (body: string) => {
    const init = { method: "POST", body };
    return await answer(await hook(new Request("http://localhost/hook", init)));
  };
  const id = `evt-${key}`;
  await deliver(`{"id":"${id}","amount":1.0,"note":"A"}`);
  const again = await deliver(
    `{ "note": "\\u0041", "amount": 1, "id": "${id}" }`,
  );
  check("a body-keyed JSON delivery written anew replays", {
    replayed: "true",
    body: "hook 1",
    hooks: 1,
  }, { replayed: again.replayed, body: again.body, hooks });
  const sample = String
    .raw`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 1e-27], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`;
  const canonical =
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}';
  const encode = (text: string) => new TextEncoder().encode(text);
  const post = new Request("http://localhost/pay", { method: "POST" });
  check(
    "jsonFingerprint of RFC 8785's sample is the hash of its canonical form",
    await requestFingerprint("POST", post.url, encode(canonical)),
    await jsonFingerprint(post, encode(sample)),
  );

  // Sealed records: node:crypto's cipher where the runtime has it, else
  // crypto.subtle; a key list without the sealing key cannot open them.
  const sealedBy = async (byte: number) => {
    const raw = btoa(String.fromCharCode(...new Uint8Array(32).fill(byte)));
    const encryption = await importEncryptionKeys(`k1:${raw}`);
    return idempotency(() => new Response("sealed", { status: 201 }), {
      scope: "global",
      store,
      encryption,
    });
  };
  const sealedPost = async (
    guarded: (r: Request) => Response | Promise<Response>,
  ) =>
    await answer(
      await guarded(
        new Request("http://localhost/sealed", {
          method: "POST",
          headers: { "idempotency-key": `${key}-sealed` },
          body: "{}",
        }),
      ),
    );
  const sealing = await sealedBy(1);
  const sealedOnce = await sealedPost(sealing);
  check("a sealed record replays its bytes", {
    ...sealedOnce,
    replayed: "true",
  }, await sealedPost(sealing));
  const unopened = await sealedPost(await sealedBy(2));
  check("another key cannot open it: 500", 500, unopened.status);
  return checks;
}
