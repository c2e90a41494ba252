// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * {@linkcode importEncryptionKeys}: the `encryption` option from one line of
 * text, the same for the app and for the CLI's `--encryption-keys-env`
 * (docs/architecture.md, Store contract). @module
 */

import { KEY_ID } from "./_seal.ts";

/** Bytes of an AES-256 key. */
const KEY_BYTES = 32;

/** The value of the `encryption` option that {@linkcode importEncryptionKeys} makes. */
export interface EncryptionKeys {
  /** The keys in the order given: the first seals, every one opens. */
  keys: { id: string; key: Parameters<typeof crypto.subtle.encrypt>[1] }[];
}

/**
 * Turns `"k2:BASE64,k1:BASE64"` into the `encryption` option's value: each
 * entry an id (1 to 32 visible ASCII characters but `;`, `:` and `,`), a
 * colon, and 32 bytes in base64 (standard or URL-safe, padded or not),
 * imported as a non-extractable AES-GCM key. The first entry seals; all open.
 * Spaces around an entry are ignored. Bad input is a `TypeError` naming the
 * entry by position and id, never quoting its key.
 *
 * A new entry: `deno run jsr:@idempotent/http/cli --generate-key` (or
 * `` echo "$(date +%Y-%m):$(openssl rand -base64 32)" ``).
 *
 * @param text The key list, as kept in an environment variable or a secret.
 * @returns The `encryption` option.
 * @throws {TypeError} When the list is empty, an entry is malformed, an id
 * repeats, or a key does not decode to 32 bytes.
 *
 * @example Keys from an environment variable
 * ```ts
 * import { idempotency, importEncryptionKeys } from "@idempotent/http";
 * import assert from "node:assert/strict";
 *
 * // In the app: Deno.env.get("IDEMPOTENCY_KEYS")!
 * const text = "2026-02:" + btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));
 * const encryption = await importEncryptionKeys(text);
 * assert.equal(encryption.keys[0]!.id, "2026-02");
 * const handler = idempotency(() => new Response("paid"), { scope: "global", encryption });
 * const post = () => new Request("http://localhost/pay", { method: "POST", headers: { "idempotency-key": "k1" } });
 * await (await handler(post())).text();
 * assert.equal(await (await handler(post())).text(), "paid");
 * ```
 */
export async function importEncryptionKeys(
  text: string,
): Promise<EncryptionKeys> {
  if (typeof text !== "string") {
    throw new TypeError(
      `importEncryptionKeys() takes the key list as text ("id:BASE64,…"): current type is ${typeof text}`,
    );
  }
  const entries = text.split(",").map((entry) => entry.trim());
  if (entries.length === 1 && entries[0] === "") {
    throw new TypeError(
      'The encryption key list is empty: it must be "id:BASE64" entries, separated by commas, the sealing key first',
    );
  }
  const seen = new Set<string>();
  const raw: { id: string; bytes: Uint8Array<ArrayBuffer> }[] = [];
  for (const [i, entry] of entries.entries()) {
    const colon = entry.indexOf(":");
    const id = colon < 0 ? "" : entry.slice(0, colon);
    const at = `entry ${i + 1}`;
    if (colon < 0 || !KEY_ID.test(id) || /[:,]/.test(id)) {
      // The entry may be a bare key: never quote it.
      throw new TypeError(
        `The encryption key list's ${at} must be "id:BASE64", its id 1 to 32 visible ASCII characters but ';', ':' and ','${
          colon < 0 ? " (it has no colon)" : ""
        }`,
      );
    }
    const named = `${at} (id ${JSON.stringify(id)})`;
    if (seen.has(id)) {
      throw new TypeError(
        `The encryption key list's ${named} repeats an id: each key needs its own`,
      );
    }
    seen.add(id);
    const bytes = fromBase64(entry.slice(colon + 1).trim());
    if (bytes === null) {
      throw new TypeError(
        `The encryption key list's ${named} is not base64 (standard or URL-safe)`,
      );
    }
    if (bytes.byteLength !== KEY_BYTES) {
      throw new TypeError(
        `The encryption key list's ${named} decodes to ${bytes.byteLength} bytes; a key is ${KEY_BYTES}`,
      );
    }
    raw.push({ id, bytes });
  }
  const keys = await Promise.all(raw.map(async ({ id, bytes }) => {
    const key = await crypto.subtle.importKey("raw", bytes, "AES-GCM", false, [
      "encrypt",
      "decrypt",
    ]);
    bytes.fill(0);
    return { id, key };
  }));
  return { keys };
}

/** A fresh key list entry, `id:BASE64` of 32 random bytes (the CLI's `--generate-key`). */
export function generateEncryptionKey(id: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(KEY_BYTES));
  return `${id}:${btoa(String.fromCharCode(...bytes))}`;
}

/** Standard or URL-safe base64, padded or not, or `null`. */
function fromBase64(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(text) || text.length % 4 === 1) {
    return null;
  }
  const plain = text.replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
  try {
    const binary = atob(plain + "=".repeat((4 - plain.length % 4) % 4));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}
