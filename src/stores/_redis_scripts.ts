// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's Lua scripts, their replies and the reading of a claim's, on
 * the record of `_redis_record.ts`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type {
  AdminOperation,
  ClaimResult,
  PeekResult,
  StoreOperation,
} from "../store.ts";
import { completedPeek, inFlightPeek } from "./_shared.ts";
import { unreadable } from "../_record.ts";
import { type SealCount, SEALED_HEADER } from "../_seal.ts";
import { bytes, text } from "./_redis_client.ts";
import {
  COMPLETED,
  decodeCompleted,
  decodeInFlight,
  IN_FLIGHT,
  TOKEN_ID_LENGTH,
} from "./_redis_record.ts";

/**
 * The claim script's replies: `ACQUIRED`, `RECOVERED` (a lease ran out), or a
 * table headed by a `table` code: `{IN_FLIGHT, fingerprint, ms left}`,
 * `{COMPLETED, record, hint}` or `{UNREADABLE, hint}` (hint: ms to retry after).
 */
const CLAIM_REPLY = {
  ACQUIRED: 1,
  RECOVERED: 2,
  table: { IN_FLIGHT: 0, UNREADABLE: 2, COMPLETED: 3 },
} as const;

/** The fenced writes' replies: `APPLIED` or `LOST` (nothing written). */
export const WRITE_REPLY = { APPLIED: 1, LOST: 0 } as const;

/** The state script's replies: `HELD` (in flight, unreadable) or `SETTLED`. */
export const STATE_REPLY = { HELD: 1, SETTLED: 0 } as const;

// Each script touches one key (Cluster routes by it), reads it with
// `redis.pcall` (another type answers an error table, not WRONGTYPE), and
// reads no clock but the key's PTTL, for deadline and lease alike.
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
  if left > 0 and left < lease then return {${CLAIM_REPLY.table.UNREADABLE}, left} end
  return {${CLAIM_REPLY.table.UNREADABLE}, lease}
end
local v = redis.pcall('GET', key)
if type(v) == 'table' then return unreadable() end
if not v then return take(${CLAIM_REPLY.ACQUIRED}) end
local head = string.sub(v, 1, 6)
if head == '${COMPLETED}' then return {${CLAIM_REPLY.table.COMPLETED}, v, unreadable()[2]} end
if head ~= ${IN_FLIGHT_LUA} then return unreadable() end
local c = string.find(v, ':', 7, true)
local floor = c and tonumber(string.sub(v, 7, c - 1))
if not floor or #v - c < ${TOKEN_ID_LENGTH} then return unreadable() end
local left = redis.call('PTTL', key)
if left < 0 then return unreadable() end
-- The hint: what is left of the lease, which the key's expiry caps.
if left > floor then return {${CLAIM_REPLY.table.IN_FLIGHT}, string.sub(v, c + 1 + ${TOKEN_ID_LENGTH}), math.min(left - floor, left)} end
return take(${CLAIM_REPLY.RECOVERED})
`;

// The fenced writes' head: LOST unless ARGV[1], the token, holds the record
// in flight, lease or not. The writes keep the key's TTL: the deadline.
const OWNED = `local key = KEYS[1]
local v = redis.pcall('GET', key)
if type(v) ~= 'string' or string.sub(v, 1, 6) ~= ${IN_FLIGHT_LUA} then return ${WRITE_REPLY.LOST} end
local c = string.find(v, ':', 7, true)
if not c or string.sub(v, c + 1) ~= ARGV[1] then return ${WRITE_REPLY.LOST} end
`;

/** The peek script's reply: `{PEEK_REPLY kind, value, PTTL, TIME seconds, microseconds}`. */
const PEEK_REPLY = { ABSENT: 0, STRING: 1, OTHER: 2 } as const;

/** Reads the key, its PTTL and the server's TIME, and writes nothing. */
const PEEK = `local v = redis.pcall('GET', KEYS[1])
local t = redis.call('TIME')
local left = redis.call('PTTL', KEYS[1])
if type(v) == 'table' then return {${PEEK_REPLY.OTHER}, '', left, t[1], t[2]} end
if not v then return {${PEEK_REPLY.ABSENT}, '', left, t[1], t[2]} end
return {${PEEK_REPLY.STRING}, v, left, t[1], t[2]}
`;

/**
 * Counts KEYS by their head: `{in flight, completed, unreadable, sealed}`, a
 * key gone not counted; `sealed` lists the key id (JSON-escaped) of each
 * completed record whose header list is a seal's, read past the fingerprint.
 */
const STATS = `local n = {0, 0, 0, {}}
for _, key in ipairs(KEYS) do
  local head = redis.pcall('GETRANGE', key, 0, 5)
  if head == '${IN_FLIGHT}' then n[1] = n[1] + 1
  elseif head == '${COMPLETED}' then
    n[2] = n[2] + 1
    local f = redis.call('GETRANGE', key, 9, 30)
    local c = string.find(f, ':', 1, true)
    local fl = c and tonumber(string.sub(f, 1, c - 1))
    if fl then
      local at = 9 + c + fl
      local h = redis.call('GETRANGE', key, at, at + 160)
      local d = string.find(h, ':', 1, true)
      local id = d and string.match(h, '^%[%["${
  SEALED_HEADER.replace(/-/g, "%-")
}","[^;"]*;([^;]*);', d + 1)
      if id then n[4][#n[4] + 1] = id end
    end
  elseif type(head) == 'table' or head ~= '' or redis.call('EXISTS', key) == 1 then n[3] = n[3] + 1 end
end
return n
`;

function script(source: string): { source: string; sha: string } {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

/**
 * Each operation's script (ARGV after the token: complete's record, extend's
 * lease), and `state`: whether the slot is held, for `waitForChange()`.
 */
export const SCRIPTS = {
  claim: script(CLAIM),
  complete: script(`${OWNED}redis.call('SET', key, ARGV[2], 'KEEPTTL')
return ${WRITE_REPLY.APPLIED}
`),
  release: script(`${OWNED}redis.call('DEL', key)
return ${WRITE_REPLY.APPLIED}
`),
  extend: script(`${OWNED}local left = redis.call('PTTL', key)
if left < 0 then return ${WRITE_REPLY.LOST} end
redis.call('SET', key, ${IN_FLIGHT_LUA} .. string.format('%d', left - tonumber(ARGV[2])) .. ':' .. ARGV[1], 'KEEPTTL')
return ${WRITE_REPLY.APPLIED}
`),
  state: script(`local r = redis.pcall('GETRANGE', KEYS[1], 0, 5)
if r == '' or r == '${COMPLETED}' then return ${STATE_REPLY.SETTLED} end
return ${STATE_REPLY.HELD}`),
  peek: script(PEEK),
  forget: script(`return redis.call('DEL', KEYS[1])`),
  stats: script(STATS),
} satisfies Record<StoreOperation | AdminOperation | "state", unknown>;

/** The peek script's reply as a result, times on the server's clock. */
export function peekReply(reply: unknown, withResponse = false): PeekResult {
  const [kind, value, pttl, seconds, micros] = Array.isArray(reply)
    ? reply
    : [];
  if (kind === PEEK_REPLY.ABSENT) return { state: "absent" };
  const now = Number(text(seconds)) * 1000 +
    Math.floor(Number(text(micros)) / 1000);
  const left = Number(pttl);
  const expiresAt = left > 0 ? now + left : null;
  const record = kind === PEEK_REPLY.STRING ? bytes(value) : null;
  if (record === null || expiresAt === null) {
    return { state: "unreadable", expiresAt };
  }
  const claim = decodeInFlight(record);
  if (claim !== null) {
    const { fingerprint, floor } = claim;
    return inFlightPeek(fingerprint, now + left - floor, expiresAt);
  }
  const done = decodeCompleted(record);
  if (done === null) return { state: "unreadable", expiresAt };
  const { status, headers, body, omitted } = done.response;
  return completedPeek(
    done.fingerprint,
    {
      status,
      headerNames: headers.map(([name]) => name),
      bodyBytes: body?.byteLength ?? null,
      omitted,
    },
    expiresAt,
    null,
    withResponse ? done.response : undefined,
  );
}

/** The stats script's reply: its three counts; the sealed records' key ids go to `sealed`. */
export function statsReply(
  reply: unknown,
  sealed?: SealCount,
): [number, number, number] {
  const [a, b, c, d] = Array.isArray(reply) ? reply : [];
  for (const raw of Array.isArray(d) ? d : []) {
    try {
      sealed?.addId(JSON.parse(`"${text(raw)}"`)); // as the header JSON escaped it
    } catch { /* not an id the middleware wrote */ }
  }
  return [Number(a) || 0, Number(b) || 0, Number(c) || 0];
}

/** A reply's completed record as a claim's result, else `null`. */
export function completedClaim(value: unknown): ClaimResult | null {
  const record = value instanceof Uint8Array ? value : bytes(value);
  const found = record === null ? null : decodeCompleted(record);
  return found && { state: "completed", ...found };
}

/** The claim script's reply as a result (`leaseMs`: the hint it lacks). */
export function claimReply(
  reply: unknown,
  token: string,
  leaseMs: number,
): ClaimResult {
  const recovered = reply === CLAIM_REPLY.RECOVERED;
  if (recovered || reply === CLAIM_REPLY.ACQUIRED) {
    return { state: "acquired", token, recovered };
  }
  const [kind, a, b] = Array.isArray(reply) ? reply : [];
  if (kind === CLAIM_REPLY.table.IN_FLIGHT) {
    const fingerprint = text(a);
    if (fingerprint === null) return unreadable(leaseMs);
    const retryAfterMs = Math.max(1, Number(b) || 1);
    return { state: "in_flight", fingerprint, retryAfterMs };
  }
  if (kind === CLAIM_REPLY.table.COMPLETED) {
    return completedClaim(a) ?? unreadable(Number(b) || leaseMs);
  }
  const hint = kind === CLAIM_REPLY.table.UNREADABLE ? Number(a) : 0;
  return unreadable(hint || leaseMs);
}
