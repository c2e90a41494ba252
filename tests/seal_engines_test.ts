// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The two AES-256-GCM engines of sealed records (src/_aead.ts): Deno takes
 * the in-line `node:crypto` one; a runtime without it (or whose `node:crypto`
 * cannot run the cipher) gets `crypto.subtle`; a record sealed by either
 * opens under the other to the same bytes, and a byte changed anywhere opens
 * under neither.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { aesGcm, NODE_CRYPTO } from "../src/_aead.ts";

const IN_LINE_BYTES = 16 * 1024; // src/_aead.ts
import { Sealer } from "../src/_seal.ts";
import type { StoredResponse } from "../src/store.ts";

const key = await crypto.subtle.generateKey(
  { name: "AES-GCM", length: 256 },
  false,
  ["encrypt", "decrypt"],
);
const inLine = aesGcm(key);
const subtle = aesGcm(key, null);
const engines = { "node:crypto": inLine, "crypto.subtle": subtle };

Deno.test("Deno seals in line through node:crypto; without it, through crypto.subtle", async () => {
  assert.ok(NODE_CRYPTO, "Deno has process.getBuiltinModule('node:crypto')");
  const plain = new Uint8Array([1, 2, 3]);
  const sealed = inLine.seal("data", plain);
  assert.ok(sealed instanceof Uint8Array, "in line: bytes, no promise");
  assert.equal(sealed.byteLength, 12 + 3 + 16, "nonce, ciphertext, tag");
  const later = subtle.seal("data", plain);
  assert.ok(later instanceof Promise, "crypto.subtle: a promise");
  assert.equal((await later).byteLength, 12 + 3 + 16);
});

Deno.test("inputs up to IN_LINE_BYTES seal and open in line, larger ones through crypto.subtle (n-1, n, n+1)", async () => {
  for (const length of [IN_LINE_BYTES - 1, IN_LINE_BYTES, IN_LINE_BYTES + 1]) {
    const plain = crypto.getRandomValues(new Uint8Array(length));
    const inLineSeal = inLine.seal("d", plain);
    const expected = length <= IN_LINE_BYTES ? "bytes" : "promise";
    const seen = inLineSeal instanceof Promise ? "promise" : "bytes";
    assert.equal(seen, expected, `seal of ${length} bytes`);
    const sealed = await inLineSeal;
    const opening = inLine.open("d", sealed);
    const opened = opening instanceof Promise ? "promise" : "bytes";
    assert.equal(opened, expected, `open of ${length} bytes`);
    assert.deepEqual(await opening, plain);
    assert.deepEqual(await subtle.open("d", sealed), plain);
    assert.deepEqual(
      await inLine.open("d", await subtle.seal("d", plain)),
      plain,
    );
  }
});

Deno.test("a node:crypto that cannot take the key or run AES-256-GCM falls back to crypto.subtle", async () => {
  const refusing = (where: "from" | "cipher") => ({
    ...NODE_CRYPTO!,
    KeyObject: {
      from: where === "from"
        ? () => {
          throw new TypeError("no");
        }
        : NODE_CRYPTO!.KeyObject.from,
    },
    createCipheriv: where === "cipher"
      ? () => {
        throw new Error("Unknown cipher");
      }
      : NODE_CRYPTO!.createCipheriv,
  });
  for (const where of ["from", "cipher"] as const) {
    const aead = aesGcm(key, refusing(where) as typeof NODE_CRYPTO);
    const sealed = aead.seal("d", new Uint8Array([9]));
    assert.ok(sealed instanceof Promise, `${where}: crypto.subtle's promise`);
    assert.deepEqual([...await inLine.open("d", await sealed)], [9]);
  }
});

Deno.test("what one engine seals the other opens to the same bytes; one byte changed, neither does (property)", async () => {
  const pairs = [["node:crypto", "crypto.subtle"], [
    "crypto.subtle",
    "node:crypto",
  ]] as const;
  await fc.assert(
    fc.asyncProperty(
      fc.string({ unit: "binary" }),
      fc.uint8Array({ maxLength: 300 }),
      fc.nat(),
      async (data, plain, at) => {
        for (const [by, opener] of pairs) {
          const sealed = await engines[by].seal(data, plain as never);
          assert.equal(sealed.byteLength, 12 + plain.byteLength + 16);
          const opened = await engines[opener].open(data, sealed);
          assert.deepEqual([...opened], [...plain], `${by} → ${opener}`);
          const changed = sealed.slice();
          changed[at % changed.byteLength]! ^= 1;
          for (const engine of Object.values(engines)) {
            await assert.rejects(async () => await engine.open(data, changed));
          }
          await assert.rejects(async () =>
            await engines[opener].open(`${data}x`, sealed)
          );
        }
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("each seal takes a fresh nonce: the same bytes sealed twice differ, on either engine", async () => {
  for (const [name, engine] of Object.entries(engines)) {
    const plain = new Uint8Array(16);
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const sealed = await engine.seal("d", plain);
      seen.add(sealed.subarray(0, 12).join());
    }
    assert.equal(seen.size, 50, `${name}: 50 nonces`);
  }
});

Deno.test("bytes shorter than a nonce and a tag open under neither engine", async () => {
  for (const length of [0, 27, 28]) {
    const short = new Uint8Array(length);
    for (const [name, engine] of Object.entries(engines)) {
      // 28 bytes: a nonce and a tag of zeros, which fail the tag check.
      await assert.rejects(
        async () => await engine.open("d", short),
        Error,
        `${name}, ${length} bytes`,
      );
    }
  }
});

Deno.test("a record sealed on one engine opens on the other, headers, body and status alike", async () => {
  const option = { keys: [{ id: "k1", key }] };
  const node = Sealer.of(option)!;
  const web = Sealer.of(option, null)!;
  const record: StoredResponse = {
    status: 201,
    headers: [["content-type", "application/json"], ["x-owner", 'a;b="c"']],
    body: new TextEncoder().encode('{"id":"pay_1"}'),
  };
  for (const [sealer, opener] of [[node, web], [web, node]]) {
    const sealed = await sealer!.seal("slot", "fp", record);
    assert.deepEqual((await opener!.read("slot", "fp", sealed)).record, record);
    assert.equal((await opener!.read("slot", "fq", sealed)).record, null);
  }
});
