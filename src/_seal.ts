// Copyright 2026 the @idempotent/http authors. MIT license.
/** Sealed records, the `encryption` option (docs/architecture.md, Store contract). @module */

import { decodeHeaders, encodeHeaders, toStoredResponse } from "./_record.ts";
import type { StoredResponse } from "./store.ts";

/** The one header of a sealed record: `2;<key id>;<sealed header list>`. */
export const SEALED_HEADER = "idempotent-sealed";
const VERSION = "2";
const NONCE_BYTES = 12;
/** 1 to 32 visible ASCII characters but `;`, the separator. */
const KEY_ID = /^[\x21-\x3a\x3c-\x7e]{1,32}$/;

type Bytes = Uint8Array<ArrayBuffer>;
const UTF8 = new TextEncoder();

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

  /** `record` sealed for `slot` and `fingerprint`, in a shape every store accepts. */
  async seal(
    slot: string,
    fingerprint: string,
    record: StoredResponse,
  ): Promise<StoredResponse> {
    const { id, keys } = this;
    const key = keys.get(id)!;
    const clear = bound(id, slot, fingerprint, record);
    const headers = UTF8.encode(encodeHeaders(record.headers));
    const sealed = toBase64Url(await encrypt(key, clear, headers));
    const label = `${VERSION};${id};${sealed}`;
    const body = record.body as Bytes | null;
    // The status and, with no body, its `omitted` stay as they are.
    return {
      ...record,
      headers: [[SEALED_HEADER, label]],
      body: body && await encrypt(key, clear + label, body),
    };
  }

  /**
   * The record `seal` made for `slot` and `fingerprint`, or `null` when it
   * does not open: not sealed, tampered, moved, or under a key no longer
   * listed. One whose body a store dropped opens bodiless.
   */
  async open(
    slot: string,
    fingerprint: string,
    record: StoredResponse,
  ): Promise<StoredResponse | null> {
    const [pair, more] = record.headers;
    if (pair?.[0] !== SEALED_HEADER || more !== undefined) return null;
    const [version, id, ...text] = pair[1].split(";");
    const key = this.keys.get(id!);
    const sealed = fromBase64Url(text.join(";")); // null with a ";" more
    if (version !== VERSION || key === undefined || sealed === null) {
      return null;
    }
    const clear = bound(id!, slot, fingerprint, record);
    try {
      const headers = await decrypt(key, clear, sealed);
      const body = record.body as Bytes | null;
      return toStoredResponse(
        record.status,
        decodeHeaders(new TextDecoder().decode(headers)),
        body && await decrypt(key, clear + pair[1], body),
        record.omitted,
      );
    } catch {
      return null; // It does not open.
    }
  }
}

/** The additional data: what the header's ciphertext is bound to (the body's, to it too). */
function bound(
  id: string,
  slot: string,
  fingerprint: string,
  { status }: StoredResponse,
): string {
  return JSON.stringify([VERSION, id, slot, fingerprint, status]);
}

/** A fresh 12-byte nonce ‖ the AES-GCM ciphertext of `plain`. */
async function encrypt(key: SealingKey, data: string, plain: Bytes) {
  const iv = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
  const cipher = await crypto.subtle.encrypt(gcm(iv, data), key, plain);
  const sealed = new Uint8Array(NONCE_BYTES + cipher.byteLength);
  sealed.set(iv);
  sealed.set(new Uint8Array(cipher), NONCE_BYTES);
  return sealed;
}

/** What {@linkcode encrypt} sealed; throws when it does not open. */
async function decrypt(key: SealingKey, data: string, sealed: Bytes) {
  const gcm_ = gcm(sealed.subarray(0, NONCE_BYTES), data);
  const plain = crypto.subtle.decrypt(gcm_, key, sealed.subarray(NONCE_BYTES));
  return new Uint8Array(await plain);
}

function gcm(iv: Bytes, data: string): AesGcmParams {
  return { name: "AES-GCM", iv, additionalData: UTF8.encode(data) };
}

function checkKey(name: string, key: unknown): SealingKey {
  if (!(key instanceof CryptoKey)) {
    const type = Object.prototype.toString.call(key).slice(8, -1);
    throw new TypeError(`${name} must be a CryptoKey: current type is ${type}`);
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
