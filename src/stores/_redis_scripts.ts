// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's protocol: the Lua script of each operation and the reading of
 * a claim's reply (the record's layout is in `_redis_record.ts`). No
 * transport here: `redis.ts` sends these through whatever client
 * `_redis_client.ts` detected.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { ClaimResult, StoreOperation } from "../store.ts";
import { decodeHeaders, toStoredResponse, unreadable } from "../_record.ts";
import { bytes, text } from "./_redis_client.ts";
import {
  COMPLETED,
  decodeCompleted,
  IN_FLIGHT,
  TOKEN_ID_LENGTH,
} from "./_redis_record.ts";

// The record is one string (see `_redis_record.ts`). A claim is the native
// `SET key <in-flight record> NX PX ttl GET`, sent by `redis.ts`; it comes
// here, to the claim script, only when that reply is neither nil (acquired)
// nor a completed record: an in-flight record (whose lease only a script can
// read), a value that is not ours, a first-layout hash (Redis answers
// WRONGTYPE), or a server without `SET … NX … GET` (Redis before 7.0).
//
// The script of each fenced write reads the record with one GET and answers
// 0 unless it is an in-flight record under ARGV[1], the token: ownership does
// not depend on the lease (an owner nobody took over keeps it), and past its
// deadline the key is gone. It then writes with KEEPTTL, so the deadline
// never moves. Reads go through `redis.pcall`, which answers a key of
// another type with an error table instead of raising WRONGTYPE. Nothing
// reads the clock: the key's PTTL is the server's clock for both the
// deadline and the lease.
//
// The first layout, a hash per slot (kept for the claim script only):
//   v       "1"
//   st      "f" (in flight) or "c" (completed)
//   fp      the fingerprint of the first claim
//   tok     the owner's token
//   lu      lease until: server time in ms
//   dl      deadline: server time in ms; PEXPIRE drops the key then too
//   status  the response status            (completed)
//   hdr     the header pairs as JSON       (completed)
//   body    the body bytes                 (completed, unless omitted)
//   om      why the body was omitted       (completed, when omitted)
// A hash without our version field, or with a missing or malformed field,
// is unreadable.

const IN_FLIGHT_LUA = `'${IN_FLIGHT}'`;

/**
 * Shared by the fenced writes: answers 0 unless ARGV[1], the token, owns the
 * slot (an in-flight record of ours under this token). Leaves `c`, the
 * position of the colon after the floor.
 */
const OWNED = `local key = KEYS[1]
local v = redis.pcall('GET', key)
if type(v) ~= 'string' or string.sub(v, 1, 6) ~= ${IN_FLIGHT_LUA} then return 0 end
local c = string.find(v, ':', 7, true)
if not c or string.sub(v, c + 1) ~= ARGV[1] then return 0 end
`;

/**
 * ARGV: the in-flight record to write, ttlMs, leaseMs. Replies 1 (acquired),
 * 2 (acquired by taking over an expired lease), {0, fp, ms} (in flight, ms
 * left on the lease), {3, record, ms} (completed, with the hint to give
 * should the record not decode), {1, fp, status, hdr, body, om} (completed,
 * a first-layout hash), or {2, ms} (unreadable, with a retry hint).
 */
const CLAIM = `local key = KEYS[1]
local lease = tonumber(ARGV[3])
local function take(reply)
  redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
  return reply
end
local function unreadable()
  local left = redis.call('PTTL', key)
  if left > 0 and left < lease then return {2, left} end
  return {2, lease}
end
local function hash()
  local r = redis.pcall('HMGET', key, 'v', 'fp', 'dl', 'st', 'lu', 'status', 'hdr', 'body', 'om')
  if r.err then return unreadable() end
  local fp = r[2]
  local dl = tonumber(r[3])
  if r[1] ~= '1' or not fp or dl == nil then return unreadable() end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if dl <= now then return take(1) end
  if r[4] == 'c' then return {1, fp, r[6], r[7], r[8], r[9]} end
  local lu = tonumber(r[5])
  if r[4] ~= 'f' or lu == nil then return unreadable() end
  if lu > now then return {0, fp, lu - now} end
  return take(2)
end
local v = redis.pcall('GET', key)
if type(v) == 'table' then return hash() end
if not v then return take(1) end
local head = string.sub(v, 1, 6)
if head == '${COMPLETED}' then return {3, v, unreadable()[2]} end
if head ~= ${IN_FLIGHT_LUA} then return unreadable() end
local c = string.find(v, ':', 7, true)
local floor = c and tonumber(string.sub(v, 7, c - 1))
if not floor or #v - c < ${TOKEN_ID_LENGTH} then return unreadable() end
local left = redis.call('PTTL', key)
if left < 0 then return unreadable() end
-- The hint: what is left of the lease, which the key's expiry caps.
if left > floor then return {0, string.sub(v, c + ${
  TOKEN_ID_LENGTH + 1
}), math.min(left - floor, left)} end
return take(2)
`;

/** ARGV: token, the completed record. */
const COMPLETE = `${OWNED}redis.call('SET', key, ARGV[2], 'KEEPTTL')
return 1
`;

/** ARGV: token. */
const RELEASE = `${OWNED}redis.call('DEL', key)
return 1
`;

/** ARGV: token, leaseMs. */
const EXTEND = `${OWNED}local left = redis.call('PTTL', key)
if left < 0 then return 0 end
redis.call('SET', key, ${IN_FLIGHT_LUA} .. string.format('%d', left - tonumber(ARGV[2])) .. ':' .. ARGV[1], 'KEEPTTL')
return 1
`;

/** A script: its source, for EVAL, and its SHA-1, for EVALSHA. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

function script(source: string): Script {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

/** The script of each store operation. */
export const SCRIPTS: Readonly<Record<StoreOperation, Script>> = {
  claim: script(CLAIM),
  complete: script(COMPLETE),
  release: script(RELEASE),
  extend: script(EXTEND),
};

/**
 * Reads the reply of the native claim, `SET … NX PX ttl GET`: nil is
 * acquired, a completed record is a replay. Anything else (an in-flight
 * record, a value that is not ours) answers `undefined`: the claim script
 * must look.
 *
 * @param reply The command's reply, decoded by the client.
 * @param token The token the claim offered.
 * @returns What the claim found, or `undefined`.
 */
export function decodeNativeClaim(
  reply: unknown,
  token: string,
): ClaimResult | undefined {
  if (reply === null) return { state: "acquired", token, recovered: false };
  return completedClaim(reply instanceof Uint8Array ? reply : bytes(reply)) ??
    undefined;
}

/** A completed record's bytes as a claim's result; `null` when they do not decode. */
function completedClaim(value: Uint8Array | null): ClaimResult | null {
  const record = value === null ? null : decodeCompleted(value);
  return record === null ? null : {
    state: "completed",
    fingerprint: record.fingerprint,
    response: record.response,
  };
}

/**
 * Reads the claim script's reply (see {@linkcode CLAIM}): acquired under
 * `token`, in flight, completed, or unreadable (with `leaseMs` as the retry
 * hint when the reply carries none).
 *
 * @param reply The script's reply, decoded by the client.
 * @param token The token the claim offered.
 * @param leaseMs The claim's lease.
 * @returns What the claim found.
 */
export function decodeClaim(
  reply: unknown,
  token: string,
  leaseMs: number,
): ClaimResult {
  if (reply === 1 || reply === 2) {
    return { state: "acquired", token, recovered: reply === 2 };
  }
  if (!Array.isArray(reply)) return unreadable(leaseMs);
  const [kind, a, b, c, d, e] = reply;
  if (kind === 0) {
    const fp = text(a);
    return fp === null ? unreadable(leaseMs) : {
      state: "in_flight",
      fingerprint: fp,
      retryAfterMs: Math.max(1, Number(b) || 1),
    };
  }
  if (kind === 3) {
    return completedClaim(bytes(a)) ?? unreadable(Number(b) || leaseMs);
  }
  if (kind === 1) {
    const fp = text(a);
    const statusText = text(b);
    const response = toStoredResponse(
      statusText === null ? null : Number(statusText),
      decodeHeaders(text(c)),
      bytes(d),
      e === null || e === undefined ? undefined : text(e),
    );
    if (fp === null || response === null) return unreadable(leaseMs);
    return { state: "completed", fingerprint: fp, response };
  }
  if (kind === 2) return unreadable(Number(a) || leaseMs);
  return unreadable(leaseMs);
}
