// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), synchronous: workerd has no
 * `node:crypto`, `crypto.subtle` is an async hop (docs/architecture.md, Scoped
 * hashed slots). No branch or table index depends on the data. @module
 */

// Int32Array throughout: a word past 2^31 read from a Uint32Array is a double
// to V8, and the rounds run on doubles; as int32 they stay in registers.
const K = words(
  "428a2f98 71374491 b5c0fbcf e9b5dba5 3956c25b 59f111f1 923f82a4 ab1c5ed5 " +
    "d807aa98 12835b01 243185be 550c7dc3 72be5d74 80deb1fe 9bdc06a7 c19bf174 " +
    "e49b69c1 efbe4786 0fc19dc6 240ca1cc 2de92c6f 4a7484aa 5cb0a9dc 76f988da " +
    "983e5152 a831c66d b00327c8 bf597fc7 c6e00bf3 d5a79147 06ca6351 14292967 " +
    "27b70a85 2e1b2138 4d2c6dfc 53380d13 650a7354 766a0abb 81c2c92e 92722c85 " +
    "a2bfe8a1 a81a664b c24b8b70 c76c51a3 d192e819 d6990624 f40e3585 106aa070 " +
    "19a4c116 1e376c08 2748774c 34b0bcb5 391c0cb3 4ed8aa4a 5b9cca4f 682e6ff3 " +
    "748f82ee 78a5636f 84c87814 8cc70208 90befffa a4506ceb bef9a3f7 c67178f2",
);

/** Words written as FIPS 180-4 prints them (hex, space-separated), as int32. */
function words(hex: string): Int32Array {
  return new Int32Array(hex.split(" ").map((word) => parseInt(word, 16)));
}

const DIGITS = Array.from("0123456789abcdef", (c) => c.charCodeAt(0));

const encoder = new TextEncoder();
const IV = words(
  "6a09e667 bb67ae85 3c6ef372 a54ff53a 510e527f 9b05688c 1f83d9ab 5be0cd19",
);
// Module-wide state and scratch: a call runs to its end (synchronous), and
// allocating these for each call would cost more than the hash itself.
const H = new Int32Array(8);
const W = new Int32Array(64);
const BLOCK = new Uint8Array(64);
/** The digest's hex digits as char codes. */
const OUT: number[] = new Array(64).fill(0);
let used = 0;
let length = 0;
let text = new Uint8Array(256);

type Part = Uint8Array | string;

/** The hex SHA-256 of the parts' concatenation (text as UTF-8). */
export function sha256Hex(a: Part, b?: Part, c?: Part, d?: Part): string {
  hash(IV, undefined, a, b, c, d);
  return hex();
}

/** HMAC-SHA-256 under one key, hashed into the inner and outer states once. */
export class Hmac {
  #inner: Int32Array;
  #outer: Int32Array;

  constructor(key: Uint8Array) {
    const block = new Uint8Array(64);
    if (key.byteLength > 64) {
      hash(IV, undefined, key);
      digestInto(block);
    } else {
      block.set(key);
    }
    this.#inner = keyed(block, 0x36);
    this.#outer = keyed(block, 0x5c);
    block.fill(0);
    BLOCK.fill(0);
  }

  /** The hex HMAC of the parts' concatenation (text as UTF-8). */
  hex(a: Part, b?: Part, c?: Part, d?: Part): string {
    hash(this.#inner, this.#outer, a, b, c, d);
    return hex();
  }
}

/** The state after one block: the key XOR `byte` in each byte. */
function keyed(key: Uint8Array, byte: number): Int32Array {
  for (let i = 0; i < 64; i++) BLOCK[i] = key[i]! ^ byte;
  H.set(IV);
  compress(BLOCK, 0);
  return H.slice();
}

/** Leaves in `H` the parts hashed from `state`; with `outer` (HMAC), that digest hashed on from it. */
function hash(
  state: Int32Array,
  outer: Int32Array | undefined,
  a: Part,
  b?: Part,
  c?: Part,
  d?: Part,
): void {
  H.set(state);
  used = 0;
  length = outer === undefined ? 0 : 64;
  add(a);
  if (b !== undefined) add(b);
  if (c !== undefined) add(c);
  if (d !== undefined) add(d);
  pad();
  if (outer === undefined) return;
  digestInto(BLOCK);
  H.set(outer);
  used = 32;
  length = 96;
  pad();
}

/** ASCII text goes in a character at a time (`encodeInto` costs more), the rest encoded. */
function add(part: Part): void {
  if (typeof part !== "string") return update(part);
  const count = part.length;
  let i = 0;
  let at = used;
  for (; i < count; i++) {
    const code = part.charCodeAt(i);
    if (code >= 0x80) break;
    BLOCK[at++] = code;
    if (at === 64) {
      compress(BLOCK, 0);
      at = 0;
    }
  }
  used = at;
  length += i;
  if (i === count) return;
  const rest = i === 0 ? part : part.slice(i);
  if (text.byteLength < rest.length * 3) {
    text = new Uint8Array(rest.length * 3);
  }
  update(text.subarray(0, encoder.encodeInto(rest, text).written));
}

function update(bytes: Uint8Array): void {
  length += bytes.byteLength;
  let offset = 0;
  if (used > 0) {
    const take = Math.min(64 - used, bytes.byteLength);
    BLOCK.set(bytes.subarray(0, take), used);
    used += take;
    offset = take;
    if (used < 64) return;
    compress(BLOCK, 0);
    used = 0;
  }
  while (offset + 64 <= bytes.byteLength) {
    compress(bytes, offset);
    offset += 64;
  }
  if (offset < bytes.byteLength) {
    BLOCK.set(bytes.subarray(offset), 0);
    used = bytes.byteLength - offset;
  }
}

/** The last block: the padding and the length. */
function pad(): void {
  const bits = length * 8;
  BLOCK[used++] = 0x80;
  if (used > 56) {
    BLOCK.fill(0, used);
    compress(BLOCK, 0);
    used = 0;
  }
  BLOCK.fill(0, used, 56);
  const high = Math.floor(bits / 0x100000000);
  const low = bits >>> 0;
  for (let i = 0; i < 4; i++) {
    BLOCK[56 + i] = high >>> (24 - 8 * i);
    BLOCK[60 + i] = low >>> (24 - 8 * i);
  }
  compress(BLOCK, 0);
}

/** The digest's bytes, into the first 32 of `bytes`. */
function digestInto(bytes: Uint8Array): void {
  for (let i = 0; i < 32; i++) bytes[i] = H[i >> 2]! >>> (24 - 8 * (i & 3));
}

/** `H` as hex: one flat string, not a tree of 32 concatenations. */
function hex(): string {
  for (let i = 0; i < 8; i++) {
    const word = H[i]!;
    for (let j = 0; j < 8; j++) {
      OUT[i * 8 + j] = DIGITS[(word >>> (28 - 4 * j)) & 15]!;
    }
  }
  return String.fromCharCode.apply(null, OUT);
}

function compress(bytes: Uint8Array, offset: number): void {
  const w = W;
  for (let i = 0; i < 16; i++) {
    const j = offset + i * 4;
    w[i] = (bytes[j]! << 24) | (bytes[j + 1]! << 16) | (bytes[j + 2]! << 8) |
      bytes[j + 3]!;
  }
  for (let i = 16; i < 64; i++) {
    const a = w[i - 15]!, b = w[i - 2]!;
    const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
    const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^
      (b >>> 10);
    w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) | 0;
  }
  let a = H[0]!, b = H[1]!, c = H[2]!, d = H[3]!;
  let e = H[4]!, f = H[5]!, g = H[6]!, k = H[7]!;
  for (let i = 0; i < 64; i++) {
    const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^
      ((e >>> 25) | (e << 7));
    const t1 = (k + s1 + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) | 0;
    const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^
      ((a >>> 22) | (a << 10));
    const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    k = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  H[0] = (H[0]! + a) | 0;
  H[1] = (H[1]! + b) | 0;
  H[2] = (H[2]! + c) | 0;
  H[3] = (H[3]! + d) | 0;
  H[4] = (H[4]! + e) | 0;
  H[5] = (H[5]! + f) | 0;
  H[6] = (H[6]! + g) | 0;
  H[7] = (H[7]! + k) | 0;
}
