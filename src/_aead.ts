// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * AES-256-GCM for sealed records (docs/architecture.md, Store contract): a
 * 12-byte nonce ‖ ciphertext ‖ 16-byte tag. `node:crypto`'s cipher runs in
 * line where the runtime has one (Deno, Node, Bun); `crypto.subtle`, each
 * call a trip to a worker thread in Deno, where it has not (workerd without
 * `nodejs_compat`), and for inputs over {@linkcode IN_LINE_BYTES}. Both make
 * and open the same bytes.
 *
 * @module
 */

import type * as NodeCrypto from "node:crypto";
import { concatBytes } from "./_bytes.ts";

type Bytes = Uint8Array<ArrayBuffer>;
/** A `CryptoKey`, named so that Node's types find it too. */
export type SealingKey = Parameters<typeof crypto.subtle.encrypt>[1];

/**
 * The largest input sealed or opened in line: past it, Deno's `node:crypto`
 * (about 6 ns a byte) costs more than `crypto.subtle`'s hop and its 2 – 3 ns
 * a byte (bench/README.md, Sealed records).
 */
const IN_LINE_BYTES = 16 * 1024;
const NONCE = 12;
const TAG = { authTagLength: 16 } as const;
const UTF8 = new TextEncoder();

/** The runtime's `node:crypto`, taken without an import (none on workerd's core), or `null`. */
export const NODE_CRYPTO: typeof NodeCrypto | null = (() => {
  const { process } = globalThis as {
    process?: { getBuiltinModule?: (id: string) => unknown };
  };
  try {
    return (process?.getBuiltinModule?.("node:crypto") ?? null) as never;
  } catch {
    return null;
  }
})();

/** Seals and opens under one key: `open` throws when the bytes do not open. */
export interface Aead {
  seal(data: string, plain: Bytes): Bytes | Promise<Bytes>;
  open(data: string, sealed: Bytes): Bytes | Promise<Bytes>;
}

/** AES-256-GCM under `key`: in line through `node` when it takes the key and runs the cipher, else (or `null`) through `crypto.subtle`. */
export function aesGcm(key: SealingKey, node = NODE_CRYPTO): Aead {
  const gcm = (iv: Uint8Array, data: string): AesGcmParams => ({
    name: "AES-GCM",
    iv: iv as Bytes,
    additionalData: UTF8.encode(data),
  });
  const subtle: Aead = {
    async seal(data, plain) {
      const iv = nonce();
      const sealed = await crypto.subtle.encrypt(gcm(iv, data), key, plain);
      return concatBytes(
        [iv, new Uint8Array(sealed)],
        NONCE + sealed.byteLength,
      );
    },
    async open(data, sealed) {
      const [iv, rest] = [sealed.subarray(0, NONCE), sealed.subarray(NONCE)];
      return new Uint8Array(
        await crypto.subtle.decrypt(gcm(iv, data), key, rest),
      );
    },
  };
  let k: NodeCrypto.KeyObject;
  try {
    k = node!.KeyObject.from(key as never);
    node!.createCipheriv("aes-256-gcm", k, nonce(), TAG).final();
  } catch {
    return subtle;
  }
  const { createCipheriv, createDecipheriv } = node!;
  return {
    seal(data, plain) {
      if (plain.byteLength > IN_LINE_BYTES) return subtle.seal(data, plain);
      const iv = nonce();
      const cipher = createCipheriv("aes-256-gcm", k, iv, TAG);
      const text = cipher.setAAD(UTF8.encode(data)).update(plain);
      const parts = [iv, text, cipher.final(), cipher.getAuthTag()];
      return concatBytes(parts, NONCE + plain.byteLength + TAG.authTagLength);
    },
    open(data, sealed) {
      const end = sealed.byteLength - TAG.authTagLength;
      if (end - NONCE > IN_LINE_BYTES) return subtle.open(data, sealed);
      if (end < NONCE) throw new RangeError("shorter than a nonce and a tag");
      const iv = sealed.subarray(0, NONCE);
      const decipher = createDecipheriv("aes-256-gcm", k, iv, TAG);
      decipher.setAAD(UTF8.encode(data)).setAuthTag(sealed.subarray(end));
      const text = decipher.update(sealed.subarray(NONCE, end));
      const last = decipher.final(); // throws on a bad tag
      return concatBytes([text, last], text.byteLength + last.byteLength);
    },
  };
}

function nonce(): Bytes {
  return crypto.getRandomValues(new Uint8Array(NONCE));
}
