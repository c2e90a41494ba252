// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's Lua scripts ({@linkcode SCRIPTS}), their reply codes
 * ({@linkcode REPLY}) and the reading of a claim's reply. The record they
 * read and write is laid out in `_redis_record.ts`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { ClaimResult, StoreOperation } from "../store.ts";
import { unreadable } from "../_record.ts";
import { bytes, text } from "./_redis_client.ts";
import {
  COMPLETED,
  decodeCompleted,
  IN_FLIGHT,
  TOKEN_ID_LENGTH,
} from "./_redis_record.ts";

/**
 * What the scripts answer, written into their Lua text and read back here.
 *
 * - claim: `ACQUIRED` (the slot was free) or `RECOVERED` (an in-flight
 *   record past its lease taken over), or a table: `{IN_FLIGHT, fingerprint,
 *   ms left on the lease}`, `{COMPLETED, record, hint}`, `{UNREADABLE,
 *   hint}` for a value that is not ours (hint: when to retry, in ms).
 * - complete, release, extend: `APPLIED`, or `LOST` when the token does not
 *   own the slot (nothing written).
 * - state: `HELD` (in flight or unreadable) or `SETTLED` (absent, completed).
 */
export const REPLY = {
  ACQUIRED: 1,
  RECOVERED: 2,
  IN_FLIGHT: 0,
  COMPLETED: 3,
  UNREADABLE: 2,
  APPLIED: 1,
  LOST: 0,
  HELD: 1,
  SETTLED: 0,
} as const;

// Every script touches one key (Redis Cluster routes it) and reads it with
// `redis.pcall`, which answers a key of another type with an error table
// instead of raising WRONGTYPE. Nothing reads the clock: the key's PTTL is
// the server's clock for both the deadline and the lease.
const IN_FLIGHT_LUA = `'${IN_FLIGHT}'`;

/** ARGV: the in-flight record, ttlMs, leaseMs. Unreadable: hint ≤ lease. */
const CLAIM = `local key = KEYS[1]
local lease = tonumber(ARGV[3])
local function take(reply)
  redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
  return reply
end
local function unreadable()
  local left = redis.call('PTTL', key)
  if left > 0 and left < lease then return {${REPLY.UNREADABLE}, left} end
  return {${REPLY.UNREADABLE}, lease}
end
local v = redis.pcall('GET', key)
if type(v) == 'table' then return unreadable() end
if not v then return take(${REPLY.ACQUIRED}) end
local head = string.sub(v, 1, 6)
if head == '${COMPLETED}' then return {${REPLY.COMPLETED}, v, unreadable()[2]} end
if head ~= ${IN_FLIGHT_LUA} then return unreadable() end
local c = string.find(v, ':', 7, true)
local floor = c and tonumber(string.sub(v, 7, c - 1))
if not floor or #v - c < ${TOKEN_ID_LENGTH} then return unreadable() end
local left = redis.call('PTTL', key)
if left < 0 then return unreadable() end
-- The hint: what is left of the lease, which the key's expiry caps.
if left > floor then return {${REPLY.IN_FLIGHT}, string.sub(v, c + ${
  TOKEN_ID_LENGTH + 1
}), math.min(left - floor, left)} end
return take(${REPLY.RECOVERED})
`;

/**
 * The head of the fenced writes: answers LOST unless ARGV[1], the token,
 * owns the slot (an in-flight record under this token: ownership does not
 * depend on the lease, and past its deadline the key is gone). The writes
 * use KEEPTTL, so the deadline never moves.
 */
const OWNED = `local key = KEYS[1]
local v = redis.pcall('GET', key)
if type(v) ~= 'string' or string.sub(v, 1, 6) ~= ${IN_FLIGHT_LUA} then return ${REPLY.LOST} end
local c = string.find(v, ':', 7, true)
if not c or string.sub(v, c + 1) ~= ARGV[1] then return ${REPLY.LOST} end
`;

function script(source: string): { source: string; sha: string } {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

/**
 * The script of each store operation (ARGV after the token: complete the
 * completed record, extend the lease in ms), and `state`, which tells
 * `waitForChange()` whether the slot is held.
 */
export const SCRIPTS = {
  claim: script(CLAIM),
  complete: script(`${OWNED}redis.call('SET', key, ARGV[2], 'KEEPTTL')
return ${REPLY.APPLIED}
`),
  release: script(`${OWNED}redis.call('DEL', key)
return ${REPLY.APPLIED}
`),
  extend: script(`${OWNED}local left = redis.call('PTTL', key)
if left < 0 then return ${REPLY.LOST} end
redis.call('SET', key, ${IN_FLIGHT_LUA} .. string.format('%d', left - tonumber(ARGV[2])) .. ':' .. ARGV[1], 'KEEPTTL')
return ${REPLY.APPLIED}
`),
  state: script(`local r = redis.pcall('GETRANGE', KEYS[1], 0, 5)
if r == '' or r == '${COMPLETED}' then return ${REPLY.SETTLED} end
return ${REPLY.HELD}`),
} satisfies Record<StoreOperation | "state", unknown>;

/**
 * A completed record's bytes as a claim's result.
 *
 * @param value A reply's bulk string.
 * @returns The replay, or `null` when `value` is not a completed record.
 */
export function completedClaim(value: unknown): ClaimResult | null {
  const record = value instanceof Uint8Array ? value : bytes(value);
  const found = record === null ? null : decodeCompleted(record);
  return found && { state: "completed", ...found };
}

/**
 * Reads the claim script's reply (see {@linkcode REPLY}).
 *
 * @param reply The reply, decoded by the client.
 * @param token The token the claim offered.
 * @param leaseMs The claim's lease: the retry hint when the reply has none.
 * @returns What the claim found.
 */
export function claimReply(
  reply: unknown,
  token: string,
  leaseMs: number,
): ClaimResult {
  if (reply === REPLY.ACQUIRED || reply === REPLY.RECOVERED) {
    return { state: "acquired", token, recovered: reply === REPLY.RECOVERED };
  }
  const [kind, a, b] = Array.isArray(reply) ? reply : [];
  if (kind === REPLY.IN_FLIGHT) {
    const fingerprint = text(a);
    if (fingerprint === null) return unreadable(leaseMs);
    const retryAfterMs = Math.max(1, Number(b) || 1);
    return { state: "in_flight", fingerprint, retryAfterMs };
  }
  if (kind === REPLY.COMPLETED) {
    return completedClaim(a) ?? unreadable(Number(b) || leaseMs);
  }
  const hint = kind === REPLY.UNREADABLE ? Number(a) : 0;
  return unreadable(hint || leaseMs);
}
