// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `importEncryptionKeys()`: the key list's text, read as the app and the CLI
 * read it; its edges (31/32/33 bytes, both alphabets, padding, ids), errors
 * that name the entry and never its key, and `generate-key` run as a
 * subprocess, whose entry seals records the middleware replays.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { idempotency, importEncryptionKeys, MemoryStore } from "../mod.ts";

const CLI = new URL("../src/cli/cli.ts", import.meta.url).pathname;

function b64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}
const urlSafe = (text: string) => text.replace(/\+/g, "-").replace(/\//g, "_");
const unpadded = (text: string) => text.replace(/=+$/, "");
/** Bytes whose base64 has `+`, `/` and padding: 0xfb 0xff 0xbf… */
const tricky = (n: number) =>
  Uint8Array.from({ length: n }, (_, i) => [0xfb, 0xff, 0xbf][i % 3]!);

/** Whether `key` opens what a key imported from `bytes` sealed. */
async function sameKey(key: CryptoKey, bytes: Uint8Array<ArrayBuffer>) {
  const raw = await crypto.subtle.importKey("raw", bytes, "AES-GCM", false, [
    "encrypt",
  ]);
  const iv = new Uint8Array(12);
  const sealed = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv },
    raw,
    new Uint8Array([1, 2, 3]),
  );
  const plain = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv },
    key,
    sealed,
  );
  return new Uint8Array(plain).join() === "1,2,3";
}

async function rejects(text: string, pattern: RegExp, secret?: string) {
  await assert.rejects(importEncryptionKeys(text), (error: Error) => {
    assert.ok(error instanceof TypeError, String(error));
    assert.match(error.message, pattern);
    if (secret !== undefined) {
      assert.ok(!error.message.includes(secret), error.message);
    }
    return true;
  });
}

Deno.test("importEncryptionKeys() takes exactly 32 bytes: 31 and 33 are refused, naming the entry and its length", async () => {
  const [k31, k32, k33] = [31, 32, 33].map((n) => b64(tricky(n)));
  const ok = await importEncryptionKeys(`k1:${k32}`);
  assert.equal(ok.keys.length, 1);
  await rejects(
    `k1:${k31}`,
    /entry 1 \(id "k1"\) decodes to 31 bytes; a key is 32$/,
    k31,
  );
  await rejects(
    `k2:${k32},k1:${k33}`,
    /entry 2 \(id "k1"\) decodes to 33 bytes; a key is 32$/,
    k33,
  );
});

Deno.test("importEncryptionKeys() reads standard and URL-safe base64, padded or not, the first entry sealing", async () => {
  const bytes = tricky(32);
  const text = b64(bytes);
  assert.ok(/[+/]/.test(text) && text.endsWith("="), text);
  for (
    const form of [text, urlSafe(text), unpadded(text), unpadded(urlSafe(text))]
  ) {
    const { keys } = await importEncryptionKeys(
      ` now:${form} , old:${b64(new Uint8Array(32))} `,
    );
    assert.deepEqual(keys.map((k) => k.id), ["now", "old"]);
    const key = keys[0]!.key as CryptoKey;
    assert.equal(key.extractable, false);
    assert.deepEqual([...key.usages].sort(), ["decrypt", "encrypt"]);
    assert.equal((key.algorithm as AesKeyAlgorithm).length, 256);
    assert.ok(await sameKey(key, bytes), form);
  }
});

Deno.test("importEncryptionKeys() refuses an empty list, a bad entry, a repeated id and bad base64, never quoting a key", async () => {
  const key = b64(tricky(32));
  await rejects("", /key list is empty/);
  await rejects("  ", /key list is empty/);
  await rejects(`k1:${key},`, /entry 2 must be "id:BASE64"/);
  await rejects(key, /entry 1 must be "id:BASE64".*\(it has no colon\)/, key);
  await rejects(`:${key}`, /entry 1 must be "id:BASE64"/, key);
  await rejects(`a;b:${key}`, /entry 1 must be "id:BASE64"/, key);
  await rejects(`${"i".repeat(33)}:${key}`, /entry 1 must be/, key);
  await importEncryptionKeys(`${"i".repeat(32)}:${key}`); // 32 is the most
  await rejects(
    `k1:${key},k1:${key}`,
    /entry 2 \(id "k1"\) repeats an id/,
    key,
  );
  const bad = key.slice(0, 10) + "!" + key.slice(11);
  await rejects(`k1:${bad}`, /entry 1 \(id "k1"\) is not base64/, bad);
  // 45 characters: no base64 text has a length of 4n + 1.
  await rejects(`k1:${unpadded(key)}AA`, /entry 1 \(id "k1"\) is not base64/);
  await rejects(`k1:${key}==`, /entry 1 \(id "k1"\) is not base64/);
  await assert.rejects(
    importEncryptionKeys(42 as unknown as string),
    /takes the key list as text/,
  );
});

Deno.test("importEncryptionKeys() imports any 32 bytes in any of the four spellings as the same key", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.constantFrom(
        (t: string) => t,
        urlSafe,
        unpadded,
        (t: string) => unpadded(urlSafe(t)),
      ),
      async (bytes, spell) => {
        const { keys } = await importEncryptionKeys(`k:${spell(b64(bytes))}`);
        return await sameKey(keys[0]!.key as CryptoKey, new Uint8Array(bytes));
      },
    ),
    { numRuns: 50 },
  );
});

Deno.test("a raw key given to 'encryption' is refused with a pointer to importEncryptionKeys()", () => {
  assert.throws(
    () =>
      idempotency(() => new Response(), {
        scope: "global",
        encryption: { keys: [{ id: "k", key: new Uint8Array(32) as never }] },
      }),
    /must be a CryptoKey \(importEncryptionKeys\("id:BASE64"\) makes one from 32 raw bytes\): current type is Uint8Array/,
  );
});

Deno.test("cli generate-key prints an entry that importEncryptionKeys() reads and the middleware seals with", async () => {
  const run = async (...args: string[]) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", CLI, ...args], // no permissions: it needs none
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    return {
      code: out.code,
      stdout: decode(out.stdout),
      stderr: decode(out.stderr),
    };
  };
  const [a, b] = [
    await run("generate-key", "--id", "2026-03"),
    await run("--generate-key"),
  ];
  assert.equal(a.code, 0, a.stderr);
  assert.match(a.stdout, /^2026-03:[A-Za-z0-9+/]{43}=\n$/);
  assert.match(a.stderr, /Put it first in the app's key list/);
  assert.equal(b.code, 0, b.stderr);
  assert.match(b.stdout, /^\d{4}-\d{2}-\d{2}:[A-Za-z0-9+/]{43}=\n$/);
  assert.notEqual(a.stdout.split(":")[1], b.stdout.split(":")[1]);
  const bad = await run("generate-key", "--id", "a:b");
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /generate-key takes only --id ID/);
  const help = await run("generate-key", "--help");
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /generate-key \[--id ID\]/);

  const encryption = await importEncryptionKeys(
    `${a.stdout.trim()},${b.stdout.trim()}`,
  );
  const store = new MemoryStore();
  let runs = 0;
  const handler = idempotency(() => new Response(`paid ${++runs}`), {
    scope: "global",
    store,
    encryption,
  });
  const post = () =>
    new Request("http://localhost/pay", {
      method: "POST",
      headers: { "idempotency-key": "k" },
    });
  assert.equal(await (await handler(post())).text(), "paid 1");
  assert.equal(await (await handler(post())).text(), "paid 1");
  const peek = await store.peek(
    (await import("../mod.ts")).slotOf("", "k"),
    { response: true },
  );
  assert.ok(peek.state === "completed");
  assert.match(peek.response!.headers[0]![1], /^4;2026-03;/);
});
