// Copyright 2026 the @idempotent/http authors. MIT license.
/** Sealed records, the `encryption` option (docs/architecture.md, Store contract). @module */

import { decodeHeaders, encodeHeaders, toStoredResponse } from "./_record.ts";
import type { StoredResponse } from "./store.ts";

/** The one header of a sealed record: `1;<key id>`, then `;<sealed>` when the body was left out. */
export const SEALED_HEADER = "idempotent-sealed";
const VERSION = "1";
const NONCE_BYTES = 12;
/** 1 to 32 visible ASCII characters but `;`, the separator. */
const KEY_ID = /^[\x21-\x3a\x3c-\x7e]{1,32}$/;

/** A `CryptoKey`, named so that Node's types find it too. */
export type SealingKey = Parameters<typeof crypto.subtle.encrypt>[1];

/** Whether a record is sealed (to read one without keys: unreadable). */
export function isSealed(record: StoredResponse): boolean {
  return record.headers[0]?.[0] === SEALED_HEADER;
}

/** The checked `encryption` option: seals under the first key, opens under any. */
export class Sealer {
  private constructor(
    private readonly keys: ReadonlyMap<string, SealingKey>,
    private readonly id: string, // the sealing key's
  ) {}

  /** The `encryption` option checked (`TypeError`, `RangeError`), if given. */
  static of(option: unknown): Sealer | undefined {
    if (option === undefined) return undefined;
    const list = (option as { keys?: unknown } | null)?.keys;
    if (!Array.isArray(list) || list.length === 0) {
      throw new TypeError(
        "'encryption.keys' must be a non-empty list of { id, key }",
      );
    }
    const keys = new Map<string, SealingKey>();
    for (const [i, entry] of list.entries()) {
      const { id, key } = entry ?? {};
      const name = `'encryption.keys[${i}]`;
      if (typeof id !== "string" || !KEY_ID.test(id)) {
        throw new TypeError(
          `${name}.id' must be 1 to 32 visible ASCII characters but ';': current value is ${
            JSON.stringify(id)
          }`,
        );
      }
      if (keys.has(id)) {
        throw new TypeError(`${name}.id' repeats the id ${JSON.stringify(id)}`);
      }
      keys.set(id, checkKey(`${name}.key'`, key));
    }
    return new Sealer(keys, list[0].id);
  }

  /** `record` sealed for `slot`, in a shape every store accepts. */
  async seal(slot: string, record: StoredResponse): Promise<StoredResponse> {
    const { body } = record;
    const headers = new TextEncoder().encode(encodeHeaders(record.headers));
    const content = body ?? new Uint8Array(0);
    const plain = new Uint8Array(4 + headers.byteLength + content.byteLength);
    new DataView(plain.buffer).setUint32(0, headers.byteLength);
    plain.set(headers, 4);
    plain.set(content, 4 + headers.byteLength);
    const iv = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
    const { id } = this;
    const additionalData = bound(VERSION, id, slot, record);
    const algorithm = { name: "AES-GCM", iv, additionalData };
    const key = this.keys.get(id)!;
    const cipher = await crypto.subtle.encrypt(algorithm, key, plain);
    const sealed = new Uint8Array(NONCE_BYTES + cipher.byteLength);
    sealed.set(iv);
    sealed.set(new Uint8Array(cipher), NONCE_BYTES);
    const label = body === null
      ? `${VERSION};${id};${toBase64Url(sealed)}`
      : `${VERSION};${id}`;
    // The status and, with no body, its `omitted` stay as they are.
    return {
      ...record,
      headers: [[SEALED_HEADER, label]],
      body: body && sealed,
    };
  }

  /**
   * The record `seal` made for `slot`, or `null` when it does not open:
   * not sealed, tampered, moved, or under a key no longer listed.
   */
  async open(
    slot: string,
    record: StoredResponse,
  ): Promise<StoredResponse | null> {
    const [pair, more] = record.headers;
    if (pair?.[0] !== SEALED_HEADER || more !== undefined) return null;
    const parts = pair[1].split(";");
    const [version, id, text] = parts;
    const key = this.keys.get(id!);
    if (
      version !== VERSION || key === undefined ||
      parts.length !== (record.body === null ? 3 : 2)
    ) return null;
    const sealed = (record.body as Uint8Array<ArrayBuffer> | null) ??
      fromBase64Url(text!);
    if (sealed === null) return null;
    const iv = sealed.subarray(0, NONCE_BYTES);
    const additionalData = bound(version, id!, slot, record);
    const algorithm = { name: "AES-GCM", iv, additionalData };
    try {
      const cipher = sealed.subarray(NONCE_BYTES);
      const plain = new Uint8Array(
        await crypto.subtle.decrypt(algorithm, key, cipher),
      );
      const length = new DataView(plain.buffer).getUint32(0);
      const headers = decodeHeaders(
        new TextDecoder().decode(plain.subarray(4, 4 + length)),
      );
      const body = record.body === null ? null : plain.subarray(4 + length);
      return toStoredResponse(record.status, headers, body, record.omitted);
    } catch {
      return null; // It does not open.
    }
  }
}

/** What stays in clear, as the ciphertext's additional data. */
function bound(
  version: string,
  id: string,
  slot: string,
  { status, omitted }: StoredResponse,
): Uint8Array<ArrayBuffer> {
  const clear = [version, id, slot, status, omitted ?? null];
  return new TextEncoder().encode(JSON.stringify(clear));
}

function checkKey(name: string, key: unknown): SealingKey {
  if (!(key instanceof CryptoKey)) {
    throw new TypeError(`${name} must be a CryptoKey: current value is ${key}`);
  }
  const { name: algorithm, length } = key.algorithm as AesKeyAlgorithm;
  if (key.type !== "secret" || algorithm !== "AES-GCM") {
    throw new TypeError(
      `${name} must be an AES-GCM key: current key is ${key.type} ${algorithm}`,
    );
  }
  if (length !== 256) {
    throw new RangeError(
      `${name} must be of 256 bits: current length is ${length}`,
    );
  }
  if (!key.usages.includes("encrypt") || !key.usages.includes("decrypt")) {
    throw new TypeError(
      `${name} must allow "encrypt" and "decrypt": current usages are ${
        JSON.stringify(key.usages)
      }`,
    );
  }
  return key;
}

function toBase64Url(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.byteLength; i += 0x8000) {
    text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return null;
  try {
    const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}
