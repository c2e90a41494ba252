// Copyright 2026 the @idempotent/http authors. MIT license.
/** Sealed records, the `encryption` option (docs/architecture.md, Store contract). @module */

import { type Aead, aesGcm, NODE_CRYPTO, type SealingKey } from "./_aead.ts";
import { concatBytes } from "./_bytes.ts";
import { decodeHeaders, encodeHeaders, toStoredResponse } from "./_record.ts";
import type { StoredResponse } from "./store.ts";
import { STORE_DROPPED } from "./stores/_shared.ts";

/** The one header of a sealed record: `4;<key id>;<sealed header list>`. */
export const SEALED_HEADER = "idempotent-sealed";
/**
 * The seal written: its body's ciphertext holds the header list too, so a
 * replay opens once. `3`, whose body holds the body alone, and `2`, whose
 * additional data lacks the omitted reason, still open.
 */
const VERSION = "4";
const VERSIONS = new Set(["2", "3", VERSION]);
/** 1 to 32 visible ASCII characters but `;`, the separator. */
export const KEY_ID = /^[\x21-\x3a\x3c-\x7e]{1,32}$/;

type Bytes = Uint8Array<ArrayBuffer>;
const UTF8 = new TextEncoder();
const TEXT = new TextDecoder();

/** Whether a record's header names are a seal's: one header, the seal. */
export function isSealed(headerNames: readonly string[]): boolean {
  return headerNames.length === 1 && headerNames[0] === SEALED_HEADER;
}

/** The key id a sealed header list's JSON (`encodeHeaders`) names, or `null`: for a store's `stats`. */
export function sealedKeyId(headersJson: string): string | null {
  if (!headersJson.startsWith(SEALED_JSON)) return null;
  const headers = decodeHeaders(headersJson);
  if (headers === null || headers.length !== 1) return null;
  return sealLabel({ status: 200, headers, body: null })?.keyId ?? null;
}

const SEALED_JSON = `[[${JSON.stringify(SEALED_HEADER)},`;

/** Counts sealed records by key id, for a store's `stats` (`StoreStats.sealed`). */
export class SealCount {
  readonly #ids = new Map<string, number>();

  /** Counts a completed record by its header list's JSON. */
  add(headersJson: string): void {
    const id = sealedKeyId(headersJson);
    if (id !== null) this.addId(id);
  }

  /** Counts a record sealed under `id`, `n` times. */
  addId(id: string, n = 1): void {
    this.#ids.set(id, (this.#ids.get(id) ?? 0) + n);
  }

  /** `{ sealed }` for the stats: own properties, whatever the ids (`__proto__` too). */
  get counts(): { sealed: Record<string, number> } {
    return { sealed: Object.fromEntries(this.#ids) };
  }
}

/** A sealed record's version and key id, read from its label (unverified), or `null`. */
export function sealLabel(
  record: StoredResponse,
): { version: string; keyId: string } | null {
  const pair = record.headers[0];
  if (pair?.[0] !== SEALED_HEADER) return null;
  const [version = "", keyId = ""] = pair[1].split(";", 2);
  return { version, keyId };
}

/**
 * What {@linkcode Sealer.read} found: the record opened, or `null` and why
 * not (`keyId`: the id its label names, when it has one).
 */
export type Opened =
  | { record: StoredResponse; keyId: string }
  | { record: null; reason: string; keyId?: string };

/** Why a sealed record is not read without the `encryption` option. */
export function unsealedReason(record: StoredResponse): Opened | null {
  const label = sealLabel(record);
  if (label === null) return null;
  const { keyId } = label;
  const reason = `sealed under key id ${
    JSON.stringify(keyId)
  }, and no 'encryption' option is given`;
  return { record: null, reason, keyId };
}

/** The checked `encryption` option: seals under the first key, opens under any. */
export class Sealer {
  private constructor(
    private readonly keys: ReadonlyMap<string, Aead>,
    private readonly id: string, // the sealing key's
  ) {}

  /**
   * The `encryption` option checked (`TypeError`, `RangeError`), if given;
   * `node`: the `node:crypto` that seals in line (`null`: `crypto.subtle`).
   */
  static of(option: unknown, node = NODE_CRYPTO): Sealer | undefined {
    if (option === undefined) return undefined;
    const list = (option as { keys?: unknown } | null)?.keys;
    if (!Array.isArray(list) || list.length === 0) {
      throw new TypeError(
        "'encryption.keys' must be a non-empty list of { id, key }",
      );
    }
    const keys = new Map<string, Aead>();
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
      keys.set(id, aesGcm(checkKey(`${name}.key'`, key), node));
    }
    return new Sealer(keys, list[0].id);
  }

  /** Whether a key of this id is listed (it may open a record). */
  holds(id: string): boolean {
    return this.keys.has(id);
  }

  /** `record` sealed for `slot` and `fingerprint`, in a shape every store accepts. */
  async seal(
    slot: string,
    fingerprint: string,
    record: StoredResponse,
  ): Promise<StoredResponse> {
    const { id, keys } = this;
    const key = keys.get(id)!;
    const clear = bound(VERSION, id, slot, fingerprint, record);
    const headers = UTF8.encode(encodeHeaders(record.headers));
    const sealed = toBase64Url(await key.seal(clear, headers));
    const label = `${VERSION};${id};${sealed}`;
    const body = record.body as Bytes | null;
    // The status and, with no body, its `omitted` stay as they are. The
    // label's header list opens a record whose body a store drops.
    return {
      ...record,
      headers: [[SEALED_HEADER, label]],
      body: body && await key.seal(clear + label, framed(headers, body)),
    };
  }

  /**
   * The record `seal` made for `slot` and `fingerprint`, or `null` and why it
   * does not open: not sealed, tampered, moved, or under a key no longer
   * listed. One whose body a store dropped opens bodiless.
   */
  async read(
    slot: string,
    fingerprint: string,
    record: StoredResponse,
  ): Promise<Opened> {
    const [pair, more] = record.headers;
    if (pair?.[0] !== SEALED_HEADER) return { record: null, reason: CLEAR };
    const [version = "", id = "", ...text] = pair[1].split(";");
    const keyId = id;
    if (more !== undefined) return { record: null, reason: altered(id), keyId };
    if (!VERSIONS.has(version)) {
      const reason = `sealed in seal version ${
        JSON.stringify(version)
      }, which this version cannot open`;
      return { record: null, reason, keyId };
    }
    const key = this.keys.get(id);
    if (key === undefined) {
      return { record: null, reason: missingKey(id), keyId };
    }
    const clear = bound(version, id, slot, fingerprint, record);
    const body = record.body as Bytes | null;
    try {
      // Version 4 holds the header list in the body's seal too: one open,
      // the label bound as additional data, its copy not decoded.
      const parts = body && version === VERSION
        ? unframed(await key.open(clear + pair[1], body))
        : await openParts(key, clear, text.join(";"), pair[1], body);
      const opened = parts && toStoredResponse(
        record.status,
        decodeHeaders(TEXT.decode(parts[0])),
        parts[1],
        record.omitted,
      );
      if (opened) return { record: opened, keyId };
    } catch {
      // It does not open.
    }
    return { record: null, reason: altered(id), keyId };
  }
}

/** Why a record sealed under a key id not listed does not open. */
export function missingKey(id: string): string {
  return `sealed under key id ${JSON.stringify(id)}, not among the keys given`;
}

function altered(id: string): string {
  return `does not open under key id ${
    JSON.stringify(id)
  }: altered in the store, or moved from another slot or fingerprint`;
}

const CLEAR = "written in clear (no seal) while the 'encryption' option is on";

/**
 * The additional data: what the header's ciphertext is bound to (the body's,
 * to it too). From version 3 it binds the omitted reason the middleware wrote
 * (`""` with a body); a body the store dropped (`store_dropped`) was written
 * with its body, so it reads as `""`.
 */
function bound(
  version: string,
  id: string,
  slot: string,
  fingerprint: string,
  { status, omitted }: StoredResponse,
): string {
  if (version === "2") {
    return JSON.stringify([version, id, slot, fingerprint, status]);
  }
  const decided = omitted === undefined || omitted === STORE_DROPPED
    ? ""
    : omitted;
  return JSON.stringify([version, id, slot, fingerprint, status, decided]);
}

/** The header list and body of a version 2 or 3 record, or of a bodiless one. */
async function openParts(
  key: Aead,
  clear: string,
  sealedHeaders: string,
  label: string,
  body: Bytes | null,
): Promise<readonly [Bytes, Bytes | null] | null> {
  const sealed = fromBase64Url(sealedHeaders); // null with a ";" more
  if (sealed === null) return null;
  return [
    await key.open(clear, sealed),
    body && await key.open(clear + label, body),
  ];
}

/** A version 4 body's plain text: the header list's length (4 bytes, big-endian), the list, the body. */
function framed(headers: Bytes, body: Bytes): Bytes {
  const length = new Uint8Array(4);
  new DataView(length.buffer).setUint32(0, headers.byteLength);
  const parts = [length, headers, body];
  return concatBytes(parts, 4 + headers.byteLength + body.byteLength);
}

/** What {@linkcode framed} joined, or `null` when its length runs past its end. */
function unframed(plain: Bytes): readonly [Bytes, Bytes] | null {
  if (plain.byteLength < 4) return null;
  const end = 4 + new DataView(plain.buffer, plain.byteOffset).getUint32(0);
  if (end > plain.byteLength) return null;
  return [plain.subarray(4, end), plain.subarray(end)];
}

function checkKey(name: string, key: unknown): SealingKey {
  if (!(key instanceof CryptoKey)) {
    const type = Object.prototype.toString.call(key).slice(8, -1);
    throw new TypeError(
      `${name} must be a CryptoKey (importEncryptionKeys("id:BASE64") makes one from 32 raw bytes): current type is ${type}`,
    );
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

function fromBase64Url(text: string): Bytes | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return null;
  try {
    const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}
