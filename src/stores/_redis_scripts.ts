// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's protocol: the record's layout in a Redis hash, the Lua script
 * of each operation, and the reading of a claim's reply. No transport here:
 * `redis.ts` sends these through whatever client `_redis_client.ts` detected.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { ClaimResult, StoreOperation } from "../store.ts";
import {
  decodeHeaders,
  RECORD_VERSION,
  toStoredResponse,
  unreadable,
} from "../_record.ts";
import { bytes, text } from "./_redis_client.ts";

// The record is a hash at `prefix + slot`:
//   v       the record format version (RECORD_VERSION)
//   st      "f" (in flight) or "c" (completed)
//   fp      the fingerprint of the first claim
//   tok     the owner's token
//   lu      lease until: server time in ms
//   dl      deadline: server time in ms; PEXPIRE drops the key then too
//   status  the response status            (completed)
//   hdr     the header pairs as JSON       (completed)
//   body    the body bytes                 (completed, unless omitted)
//   om      why the body was omitted       (completed, when omitted)
// Any other value at the key (another type, a hash without our version
// field, a missing or malformed field, another version) is unreadable: it
// reads as in flight and no script ever writes to it. Reads go through
// `redis.pcall`, which answers a key of another type with an error table
// instead of raising WRONGTYPE: one call where `TYPE` and then a read would
// be two. The key expires at `dl` (PEXPIRE at the claim), so Redis itself
// hides a record past its deadline; `complete` and `release` need no clock.
//
// Every `redis.call` costs the server about a microsecond, and the server's
// time is what bounds throughput at many requests in flight: the scripts make
// as few as they can (claim: TIME, HMGET, and EXISTS + HSET + PEXPIRE when
// it takes a free slot; complete: HMGET, HSET; release: HMGET, DEL; extend:
// TIME, HMGET, HSET). The claim reads the fields it needs with one HMGET
// rather than HGETALL into a Lua table: measured with redis-benchmark on a
// completed record, 0.77x the server time of a replay. HMGET cannot tell an
// absent key from a hash without our fields, so when `v` is missing an EXISTS
// tells them apart (a foreign hash stays unreadable, never overwritten).

const V = String(RECORD_VERSION);

/** The server's clock in ms. */
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/**
 * Shared by the fenced writes: answers 0 unless ARGV[1], the token, owns the
 * slot (a record of ours, in flight under this token; past its deadline the
 * key is gone). Ownership does not depend on the lease: an owner nobody took
 * over keeps it.
 */
const OWNED = `local key = KEYS[1]
local r = redis.pcall('HMGET', key, 'v', 'st', 'tok', 'dl')
if r.err or r[1] ~= '${V}' or r[2] ~= 'f' or r[3] ~= ARGV[1] or not tonumber(r[4]) then
  return 0
end
`;

/**
 * ARGV: fingerprint, token, leaseMs, ttlMs. Replies 1 (acquired), 2
 * (acquired by taking over an expired lease), {0, fp, ms} (in flight, ms
 * left on the lease), {1, fp, status, hdr, body, om} (completed), or
 * {2, ms} (unreadable, with a retry hint).
 */
const CLAIM = `local key = KEYS[1]
${NOW}local lease = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local function take(reply, existed)
  if existed then redis.call('DEL', key) end
  redis.call('HSET', key, 'v', '${V}', 'st', 'f', 'fp', ARGV[1], 'tok', ARGV[2],
    'lu', string.format('%d', now + lease), 'dl', string.format('%d', now + ttl))
  redis.call('PEXPIRE', key, ttl)
  return reply
end
local function unreadable()
  local left = redis.call('PTTL', key)
  if left > 0 and left < lease then return {2, left} end
  return {2, lease}
end
local r = redis.pcall('HMGET', key, 'v', 'fp', 'dl', 'st', 'lu', 'status', 'hdr', 'body', 'om')
if r.err then return unreadable() end
local fp = r[2]
local dl = tonumber(r[3])
if r[1] ~= '${V}' or not fp or dl == nil then
  if r[1] == false and redis.call('EXISTS', key) == 0 then return take(1, false) end
  return unreadable()
end
if dl <= now then return take(1, true) end
if r[4] == 'c' then return {1, fp, r[6], r[7], r[8], r[9]} end
local lu = tonumber(r[5])
if r[4] ~= 'f' or lu == nil then return unreadable() end
if lu > now then return {0, fp, lu - now} end
return take(2, true)
`;

/** ARGV: token, status, hdr, body, om ("" when the body is present). */
const COMPLETE = `${OWNED}if ARGV[5] == '' then
  redis.call('HSET', key, 'st', 'c', 'status', ARGV[2], 'hdr', ARGV[3], 'body', ARGV[4])
else
  redis.call('HSET', key, 'st', 'c', 'status', ARGV[2], 'hdr', ARGV[3], 'om', ARGV[5])
end
return 1
`;

/** ARGV: token. */
const RELEASE = `${OWNED}redis.call('DEL', key)
return 1
`;

/** ARGV: token, leaseMs. */
const EXTEND =
  `${OWNED}${NOW}redis.call('HSET', key, 'lu', string.format('%d', now + tonumber(ARGV[2])))
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
