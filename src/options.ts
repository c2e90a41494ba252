// Copyright 2026 the @idempotent/http authors. MIT license.
/** The middleware's options and their defaults (checked by `_configure.ts`). @module */

import type { IdempotencyEvent } from "./events.ts";
import type { ProblemRenderer } from "./problem.ts";
import type { IdempotencyStore } from "./store.ts";

/** The `info` `Deno.serve` passes a handler, written out to name no `Deno` type. */
export interface ServeHandlerInfo {
  /** The remote address of the connection, as `Deno.Addr`. */
  remoteAddr:
    | { transport: "tcp" | "udp"; hostname: string; port: number }
    | { transport: "unix" | "unixpacket"; path: string }
    | { transport: "vsock"; cid: number; port: number };
  /** Settles when the response has been sent (rejects if it could not be). */
  completed: Promise<void>;
}

/**
 * A fetch handler: `Deno.serve`'s shape, with whatever arguments follow the
 * request (`info` for `Deno.serve`, `env` and `ctx` elsewhere) passed through.
 */
export type FetchHandler<A extends unknown[] = [info?: ServeHandlerInfo]> = (
  request: Request,
  ...args: A
) => Response | Promise<Response>;

/** Where the log lines go: `console`, or any object with its `warn` and `error`. */
export interface Logger {
  /** Writes a line about something that may run a handler twice, or that a FailoverStore works around. */
  warn(...data: unknown[]): void;
  /** Writes a line about something that fails requests or loses a record. */
  error(...data: unknown[]): void;
  /** Optional: writes a line about a recovery (without it, `warn` does). */
  info?(...data: unknown[]): void;
}

/** Options of {@linkcode idempotency}. Every field but `scope` is optional. */
export interface IdempotencyOptions {
  /**
   * Where records are kept; instances that must see each other's keys share one.
   * @default {new MemoryStore()}
   */
  store?: IdempotencyStore;
  /**
   * Required: the stable id (not `""`) of the user, tenant or API client a
   * request acts for, resolved after authentication (may be async; a throw
   * propagates), or `"global"` for one key space shared by every caller
   * (README, Security).
   *
   * @example Scoped by the authenticated account
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const accounts = new Map([["key-of-alice", "acct_1"]]); // your auth's
   * const handler = idempotency(() => new Response("ok", { status: 201 }), {
   *   scope: (request) => {
   *     const account = accounts.get(request.headers.get("x-api-key") ?? "");
   *     if (account === undefined) throw new Error("unauthenticated");
   *     return account;
   *   },
   * });
   * const headers = { "idempotency-key": "k1", "x-api-key": "key-of-alice" };
   * const res = await handler(new Request("http://localhost/pay", { method: "POST", headers }));
   * assert.equal(res.status, 201);
   * ```
   */
  scope: ((request: Request) => string | Promise<string>) | "global";
  /**
   * The request header that carries the key.
   * @default {"Idempotency-Key"}
   */
  header?: string;
  /**
   * Reads the key from the request instead of `header`, after its body:
   * `body` is the bytes the middleware read (at most `maxRequestBytes`, else
   * 413 first; do not change them). A string is checked as the header's
   * value is (400 `problem-key-malformed`); `undefined` is no key (400 with
   * `required`, else the handler runs unguarded). A throw, or anything else
   * returned, is the `problem-misconfigured` 500 with an `option_error` event
   * and line, nothing claimed or run (docs/examples.md, Keys from the body).
   * @default {undefined} (the `header`)
   *
   * @example A webhook keyed by its event id
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const handler = idempotency(() => new Response("handled"), {
   *   scope: "global",
   *   key: (_request, body) => JSON.parse(new TextDecoder().decode(body)).id,
   * });
   * const event = () => new Request("http://localhost/hook", { method: "POST", body: '{"id":"evt_1"}' });
   * await (await handler(event())).text();
   * assert.equal((await handler(event())).headers.get("idempotent-replayed"), "true");
   * ```
   */
  key?: (
    request: Request,
    body: Uint8Array,
  ) => string | undefined | Promise<string | undefined>;
  /**
   * The methods guarded, in any case, but `CONNECT`, `TRACE` and `TRACK`.
   * @default {["POST", "PATCH"]}
   */
  methods?: readonly string[];
  /**
   * Requests of a guarded method to pass through, asked before the key is read.
   * @default {undefined} (none skipped)
   */
  skip?: (request: Request) => boolean;
  /**
   * Whether a guarded request without a key is answered 400, not passed through.
   * @default {false}
   */
  required?: boolean;
  /**
   * How long a record is kept, in milliseconds, from the first claim; or a
   * function of the request (a route's, a tenant's), asked per keyed request
   * before its claim, which must not read the body. Its value is checked as
   * the number is (a positive integer, `lease` at most it): a throw or another
   * value answers 500 `problem-misconfigured`, its handler not run, with an
   * `option_error` event and log line (docs/lifetimes.md).
   * @default {86_400_000} (24 hours)
   *
   * @example A lifetime per route
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const handler = idempotency(() => new Response("ok"), {
   *   scope: "global",
   *   ttl: (request) => new URL(request.url).pathname === "/refunds" ? 31 * 86_400_000 : 900_000,
   *   advertiseLifetime: true,
   * });
   * const headers = { "idempotency-key": "k1" };
   * const res = await handler(new Request("http://api.test/refunds", { method: "POST", headers }));
   * assert.equal(res.headers.get("idempotency-ttl"), "2678400"); // seconds
   * ```
   */
  ttl?: number | ((request: Request) => number);
  /**
   * How long a claim is owned without renewal, in milliseconds (renewed while
   * the handler runs): past it, after a crash, a retry runs the handler again.
   * Or a function of the request, asked and checked as `ttl`'s is.
   * @default {30_000}
   */
  lease?: number | ((request: Request) => number);
  /**
   * Whether a recorded response and its replays carry `Idempotency-TTL`: the
   * request's `ttl` in whole seconds, how long the key is kept from its first
   * request. A provisional name (no standard has one yet: docs/lifetimes.md).
   * @default {false}
   */
  advertiseLifetime?: boolean;
  /**
   * The largest request body buffered for the fingerprint; larger: 413.
   * @default {1_048_576} (1 MiB)
   */
  maxRequestBytes?: number;
  /**
   * The largest response body recorded; a larger one is streamed, not recorded.
   * @default {1_048_576} (1 MiB)
   */
  maxResponseBytes?: number;
  /**
   * Which responses are recorded; the others release the key for a retry.
   * @default {(response) => response.ok} (2xx)
   */
  cacheable?: (response: Response) => boolean;
  /**
   * The request's fingerprint (same key, another one: 422), hashed to store;
   * `jsonFingerprint` compares JSON bodies by value.
   * @default {requestFingerprint} (method, path with query, body)
   */
  fingerprint?: (
    request: Request,
    body: Uint8Array,
  ) => string | Promise<string>;
  /**
   * 32 random bytes or more (a string as UTF-8), the same on every instance:
   * slots and fingerprints are HMAC-SHA-256 under it; changing it moves every
   * slot (README, Security). Bytes are copied: the app may wipe its buffer.
   * @default {undefined} (SHA-256)
   *
   * @example Under a secret, and a key's slot found
   * ```ts
   * import { idempotency, MemoryStore, slotOf } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * // From the app's secret store (`openssl rand -hex 32`), not a literal.
   * const secret = "d2f1c8e7b6a5948372615f4e3d2c1b0a99887766554433221100ffeeddccbbaa";
   * const store = new MemoryStore();
   * const handler = idempotency(() => new Response("ok"), { scope: "global", store, secret });
   * const headers = { "idempotency-key": "k1" };
   * await handler(new Request("http://api.test/", { method: "POST", headers }));
   * const slot = slotOf("", "k1", { secret }); // "global" is scope "".
   * const claim = { fingerprint: "", leaseMs: 1_000, ttlMs: 1_000 };
   * assert.equal((await store.claim(slot, claim)).state, "completed");
   * ```
   */
  secret?: string | Uint8Array;
  /**
   * Whether to run the handler unguarded, not answer 503, when the store is down.
   * @default {false}
   */
  failOpen?: boolean;
  /**
   * Response headers (any case) the live response keeps but a record does not,
   * besides `Set-Cookie` unless `storeSetCookie`; a list replaces the default.
   * @default {["date"]}
   */
  unstoredHeaders?: readonly string[];
  /**
   * Whether records keep `Set-Cookie`: the store then holds the first caller's
   * session cookies, and every replay hands them to whoever sends the key.
   * @default {false}
   */
  storeSetCookie?: boolean;
  /**
   * Seals records: the headers, and the body apart, as AES-256-GCM
   * ciphertexts bound to the slot and the fingerprint; the first key seals,
   * every key listed opens (README, Security). In clear stay the status, why
   * no body, the key id, the fingerprint, the TTL and lease, and the body's
   * length (about). Nonces are random (96 bits): rotate the key well before
   * 2^32 seals (two a record). Every instance needs the same keys: load them
   * with `importEncryptionKeys(Deno.env.get("IDEMPOTENCY_KEYS")!)` (a key
   * generated per process makes every record a 409 after a restart).
   * @default {undefined} (records in clear)
   *
   * @example Sealed records, replayed as the handler answered
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const aes = { name: "AES-GCM", length: 256 };
   * const key = await crypto.subtle.generateKey(aes, false, ["encrypt", "decrypt"]);
   * const handler = idempotency(() => Response.json({ card: "4242" }), {
   *   scope: "global",
   *   encryption: { keys: [{ id: "2026-01", key }] },
   * });
   * const post = () => new Request("http://localhost/pay", { method: "POST", headers: { "idempotency-key": "k1" } });
   * await (await handler(post())).text();
   * const replay = await handler(post());
   * assert.deepEqual(await replay.json(), { card: "4242" });
   * ```
   */
  encryption?: {
    /** The keys, the sealing one first. */
    keys: readonly {
      /** Its name, stored with each record it seals: 1 to 32 visible ASCII characters but `;`. */
      id: string;
      /** An AES-GCM `CryptoKey` of 256 bits, for `encrypt` and `decrypt` (`importEncryptionKeys` makes one from 32 bytes). */
      key: Parameters<typeof crypto.subtle.encrypt>[1];
    }[];
  };
  /**
   * The response header that marks a replay, with the value `true`.
   * @default {"Idempotent-Replayed"}
   */
  replayHeader?: string;
  /**
   * Renders each problem (400, 409, 413, 422, 500, 503) as the
   * application's own error response, for an API that has an error format
   * (README, Status codes). It gets the problem's fields, `retryAfter` (seconds) when any,
   * the request, and `init`, the answer's status and headers to spread into
   * its `Response`. The answer keeps the status unless the renderer returns
   * another 4xx or 5xx, and gets the problem's `Cache-Control` and
   * `Retry-After` when it lacks them; a renderer that throws, rejects or
   * returns no `Response` gets the RFC 9457 problem instead.
   * @default {undefined} (RFC 9457 `application/problem+json`)
   *
   * @example Your API's own error shape (Stripe's and ACP's are presets: `@idempotent/http/presets`)
   * ```ts
   * import { idempotency } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const handler = idempotency(() => Response.json({ id: "ord_1" }), {
   *   scope: "global",
   *   renderProblem: ({ code, detail, retryable, init }) =>
   *     Response.json({ error: { code, message: detail, retryable } }, init),
   * });
   * const order = (amount: number) =>
   *   handler(new Request("http://api.test/orders", {
   *     method: "POST",
   *     headers: { "idempotency-key": "k1" },
   *     body: `amount=${amount}`,
   *   }));
   * await (await order(100)).text();
   * const reused = await order(200);
   * assert.equal(reused.status, 422);
   * assert.equal((await reused.json()).error.code, "idempotency_conflict");
   * ```
   */
  renderProblem?: ProblemRenderer;
  /**
   * Receives every {@linkcode IdempotencyEvent}, synchronously; a throw is ignored.
   * @default {undefined}
   */
  onEvent?: (event: IdempotencyEvent) => void;
  /**
   * Where the events that mean something is wrong are written, one line
   * each: `store_error` and a record's write given up with `error`;
   * `fail_open`, `lease_lost` and an unreadable record with `warn`; and,
   * through the store's `subscribe()` with no wiring, a FailoverStore's
   * `fallback`, `fallback_unavailable` and `write_failed` with `warn`, its
   * `recovered` with `info`. The first of each kind is written at once,
   * with its cause and what to do (``call `await client.connect()` ``);
   * later ones at most one line a minute, with their count. `onEvent` does
   * not change it; `false` writes nothing.
   * @default {console}
   *
   * @example Lines into the app's logger
   * ```ts
   * import { idempotency, MemoryStore } from "@idempotent/http";
   * import assert from "node:assert/strict";
   *
   * const lines: string[] = [];
   * const logger = { warn: (line: string) => lines.push(line), error: (line: string) => lines.push(line) };
   * const store = new MemoryStore({ maxEntries: 1 }); // full after one claim
   * const handler = idempotency(() => new Response("slow"), { scope: "global", store, logger });
   * await store.claim("taken", { fingerprint: "", leaseMs: 60_000, ttlMs: 60_000 });
   * const post = new Request("http://localhost/", { method: "POST", headers: { "idempotency-key": "k1" } });
   * assert.equal((await handler(post)).status, 503);
   * assert.match(lines[0]!, /store_error: the store's claim failed .*MemoryStore is full/);
   * ```
   */
  logger?: false | Logger;
  /**
   * How long (ms, from a failed write) a response waits for its record's write.
   * @default {1_000}
   */
  completionWait?: number;
  /**
   * How long (ms, from a failed write) a record's write is retried, then given up.
   * @default {300_000} (5 minutes)
   */
  completionTimeout?: number;
  /**
   * How many record writes one instance retries in the background; past it, responses wait.
   * @default {100}
   */
  maxPendingCompletions?: number;
  /**
   * How long, in milliseconds, a duplicate of a running request waits for its
   * replay instead of a 409 (0: at once). Waiting reads `request.signal`, of
   * which `Deno.serve` prints a notice unless `--unstable-no-legacy-abort`.
   * @default {0}
   */
  waitForInFlight?: number;
  /**
   * How many duplicates one instance lets wait at once; past it: 409. Only
   * with `waitForInFlight` above 0 (else a `TypeError`: it would do nothing).
   * @default {1_000}
   */
  maxWaiting?: number;
}

/** The options' default values. */
export const DEFAULTS = Object.freeze({
  header: "Idempotency-Key",
  methods: Object.freeze(["POST", "PATCH"]) as readonly string[],
  required: false,
  ttl: 86_400_000,
  lease: 30_000,
  maxRequestBytes: 1_048_576,
  maxResponseBytes: 1_048_576,
  failOpen: false,
  unstoredHeaders: Object.freeze(["date"]) as readonly string[],
  storeSetCookie: false,
  advertiseLifetime: false,
  replayHeader: "Idempotent-Replayed",
  completionWait: 1_000,
  completionTimeout: 300_000,
  maxPendingCompletions: 100,
  waitForInFlight: 0,
  maxWaiting: 1_000,
});
