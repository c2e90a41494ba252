// Copyright 2026 the @idempotent/http authors. MIT license.
/** One guarded request's way, step by step (docs/architecture.md, The request's way). @module */

import { bodyInit, EMPTY } from "./_bytes.ts";
import { markClaimed } from "./_claimed.ts";
import { Completions, reportStoreError } from "./_completion.ts";
import { type Beat, Heartbeat } from "./_heartbeat.ts";
import {
  fingerprintOf,
  keyFrom,
  readBody,
  rebuild,
  scopeOf,
} from "./_request.ts";
import {
  exposed,
  LIFETIME_HEADER,
  replay,
  responseBody,
  storedHeaders,
  withHeader,
} from "./_response.ts";
import { unsealedReason } from "./_seal.ts";
import { Refusals } from "./_refusals.ts";
import { SettleEstimate } from "./_settle_estimate.ts";
import { type Report, reporter } from "./events.ts";
import type { Config } from "./_configure.ts";
import type { FetchHandler } from "./options.ts";
import { problemResponse } from "./problem.ts";
import type { ClaimResult, StoredResponse, UnitOfWork } from "./store.ts";
import { type Claimed, Waiters, waitForOwner } from "./_waiters.ts";

/** One guarded request: what every step of its way reads and fills in. */
interface Flight<A extends unknown[]> {
  readonly request: Request;
  readonly args: A;
  /** By `config.clock`; 0 when no one listens. */
  readonly started: number;
  slot: string | null;
  fingerprint?: string;
  /** Its key and its `ttl` and `lease`, once known. */
  key?: string;
  lifetime?: Lifetime;
  /** Its claim once acquired, until it is settled. */
  beat?: Beat;
}

type Lifetime = { ttlMs: number; leaseMs: number };
/** The guard behind each handler `idempotency()` and middleware `idempotent()` returned, for `drainCompletions`. */
export const GUARDS: WeakMap<object, { drain(): Promise<void> }> =
  new WeakMap();

/** The request's lease, in milliseconds. */
const lease = (flight: { lifetime?: Lifetime }) => flight.lifetime!.leaseMs;

/** One middleware instance's guard. */
export class Guard<A extends unknown[]> {
  #handler: FetchHandler<A>;
  #config: Config;
  #report: Report;
  #heartbeat: Heartbeat;
  #completions: Completions;
  /** For the 409's `Retry-After`. */
  #settleTime = new SettleEstimate();
  /** With `waitForInFlight`. */
  #waiters: Waiters | undefined;
  #no: Refusals;

  constructor(handler: FetchHandler<A>, config: Config) {
    this.#handler = handler;
    this.#config = config;
    const report = this.#report = reporter(config.onEvent, config.clock);
    this.#no = new Refusals(config, report);
    this.#heartbeat = new Heartbeat(config.store, config.lifetime?.leaseMs, {
      lost: ({ slot, started }) =>
        report(() => ({ type: "lease_lost", slot }), started),
      error: (beat, error) => reportStoreError(report, beat, "extend", error),
    }, config.clock);
    this.#completions = new Completions(config, this.#heartbeat, report);
    if (config.waitForInFlight > 0) {
      this.#waiters = new Waiters(
        config.waitForInFlight,
        config.maxWaiting,
        config.clock,
      );
    }
  }

  /** Answers a request of a guarded method; `value` is its key header's, or `null` (unread with `key`). */
  async handle(
    request: Request,
    value: string | null,
    args: A,
  ): Promise<Response> {
    return this.exposed(request, await this.#answer(request, value, args));
  }

  /** `response`, its headers exposed to a browser's cross-origin `request`. */
  exposed(request: Request, response: Response): Response {
    return exposed(request, response, this.#config.replayHeader);
  }

  async #answer(
    request: Request,
    value: string | null,
    args: A,
  ): Promise<Response> {
    const config = this.#config;
    const started = config.onEvent ? config.clock.now() : 0;
    const flight: Flight<A> = { request, args, started, slot: null };
    const { header, key: keyOf } = config;
    // With `key`, the key is the function's, once the body is read.
    if (keyOf === undefined) {
      if (value === null) return this.#no.refuse(flight, "missing", { header });
      const refused = this.#no.checked(flight, value, "");
      if (refused !== undefined) return refused;
    }
    const body = await readBody(request, config.maxRequestBytes);
    if (!(body instanceof Uint8Array)) return this.#no.unread(flight, body);
    if (keyOf !== undefined) {
      const found = await keyFrom(keyOf, request, body);
      if (typeof found === "object") {
        return this.#no.misconfigured(flight, found);
      }
      if (found === undefined && config.required) {
        return this.#no.refuse(flight, "missing", { header });
      }
      if (found === undefined) {
        return await this.#handler(rebuild(request, body), ...args);
      }
      const by = " (read by the server's 'key' option)";
      const refused = this.#no.checked(flight, found, by);
      if (refused !== undefined) return refused;
    }
    const scope = scopeOf(request, config.scope);
    flight.slot = config.hasher.slot(
      typeof scope === "string" ? scope : await scope,
      flight.key!,
    );
    const computed = fingerprintOf(request, body, config);
    const fingerprint = flight.fingerprint = typeof computed === "string"
      ? computed
      : await computed;

    const first = await this.#claim(flight, fingerprint);
    const claim = this.#waiters === undefined
      ? first
      : await this.#waitForOwner(flight, fingerprint, first);
    switch (claim.state) {
      case "unreachable":
        return await this.#unreachable(flight, body, claim.error);
      case "completed": {
        if (claim.fingerprint !== fingerprint) return this.#no.mismatch(flight);
        const { encryption } = config;
        const opened = encryption === undefined
          ? unsealedReason(claim.response) ?? { record: claim.response }
          : await encryption.read(flight.slot, fingerprint, claim.response);
        if (opened.record !== null) {
          return this.#replay(flight, opened.record, claim !== first);
        }
        // docs/architecture.md, Unreadable is in flight.
        return await this.#unreadable(flight, lease(flight), opened);
      }
      case "in_flight":
        if (claim.fingerprint === null) {
          return await this.#unreadable(flight, claim.retryAfterMs);
        }
        if (claim.fingerprint !== fingerprint) return this.#no.mismatch(flight);
        return this.#conflict(flight, claim.retryAfterMs);
      case "acquired":
        return await this.#run(flight, body, claim);
    }
  }

  async #claim(flight: Flight<A>, fingerprint: string): Promise<Claimed> {
    const { store } = this.#config;
    const slot = flight.slot!;
    try {
      return await store.claim(slot, { fingerprint, ...flight.lifetime! });
    } catch (error) {
      reportStoreError(this.#report, flight, "claim", error);
      return { state: "unreachable", error };
    }
  }

  /** Marks an acquired slot owned, or waits for its owner (`_waiters.ts`). */
  async #waitForOwner(
    flight: Flight<A>,
    fingerprint: string,
    claim: Claimed,
  ): Promise<Claimed> {
    const waiters = this.#waiters!;
    const slot = flight.slot!;
    if (claim.state === "acquired") {
      waiters.owned(slot);
      return claim;
    }
    if (
      claim.state !== "in_flight" ||
      (claim.fingerprint !== null && claim.fingerprint !== fingerprint)
    ) {
      return claim;
    }
    const { store } = this.#config;
    return await waitForOwner(waiters, {
      slot,
      fingerprint,
      started: flight.started,
      signal: () => flight.request.signal,
      claim: () => this.#claim(flight, fingerprint),
      watch: store.waitForChange &&
        (async (signal) => await store.waitForChange!(slot, signal)),
      report: this.#report,
    }, claim);
  }

  /** The store could not be reached: 503, or the handler unguarded (`failOpen`). */
  async #unreachable(
    flight: Flight<A>,
    body: Uint8Array<ArrayBuffer>,
    error: unknown,
  ): Promise<Response> {
    const { request, slot } = flight;
    const { failOpen, renderProblem } = this.#config;
    if (!failOpen) {
      this.#report(
        () => ({ type: "unavailable", slot, error }),
        flight.started,
      );
      return await problemResponse(request, "unavailable", {}, renderProblem);
    }
    this.#report(() => ({ type: "fail_open", slot, error }), flight.started);
    return await this.#handler(rebuild(request, body), ...flight.args);
  }

  #replay(
    flight: Flight<A>,
    response: StoredResponse,
    waited: boolean,
  ): Response {
    const { slot } = flight;
    this.#report(() => ({
      type: "replayed",
      slot,
      status: response.status,
      ...(response.omitted ? { omitted: response.omitted } : {}),
      ...(waited ? { waited } : {}),
    }), flight.started);
    const { replayHeader, unstoredHeaders } = this.#config;
    return this.#advertised(
      flight,
      replay(response, replayHeader, unstoredHeaders),
    );
  }

  #conflict(
    flight: Flight<A>,
    retryAfterMs: number,
  ): Response | Promise<Response> {
    const { slot } = flight;
    this.#report(
      () => ({ type: "conflict", slot, retryAfterMs, unreadable: false }),
      flight.started,
    );
    const retryAfter = this.#settleTime.retryAfterSeconds(
      retryAfterMs,
      // The time since the holder's claim or last renewal.
      Math.max(0, lease(flight) - retryAfterMs),
    );
    const render = this.#config.renderProblem;
    return problemResponse(flight.request, "inFlight", { retryAfter }, render);
  }

  /**
   * The key's record cannot be read: 500, the handler never run, and the
   * event says when the value expires (`null`: never, until forgotten) when
   * someone listens (docs/architecture.md, Unreadable is in flight).
   */
  async #unreadable(
    flight: Flight<A>,
    retryAfterMs: number,
    sealed?: { reason: string; keyId?: string },
  ): Promise<Response> {
    const { slot } = flight;
    const { store, onEvent } = this.#config;
    let expiresAt: number | null | undefined;
    if (onEvent !== undefined && store.peek !== undefined) {
      try {
        const found = await store.peek(slot!);
        if (found.state !== "absent") expiresAt = found.expiresAt;
      } catch {
        // The event goes without it; the answer is the same.
      }
    }
    return await this.#no.problem(flight, "unreadable", {}, () => ({
      type: "conflict",
      slot,
      retryAfterMs,
      unreadable: true,
      ...(expiresAt === undefined ? {} : { expiresAt }),
      ...(sealed && { reason: sealed.reason }),
      ...(sealed?.keyId !== undefined && { keyId: sealed.keyId }),
    }));
  }

  /** Runs the handler on the claimed slot, then releases or settles it. */
  async #run(
    flight: Flight<A>,
    body: Uint8Array<ArrayBuffer>,
    { token, recovered }: ClaimResult & { state: "acquired" },
  ): Promise<Response> {
    const { slot, started } = flight;
    this.#report(() => ({ type: "claimed", slot, recovered }), started);
    const running = this.#config.clock.now();
    try {
      const request = rebuild(flight.request, body);
      markClaimed(request);
      const beat = flight.beat = this.#heartbeat.start(
        slot!,
        token,
        started,
        lease(flight),
      );
      const unit = this.#config.store.unitOfWork?.(request, slot!, token);
      let response: Response;
      try {
        response = await this.#handler(request, ...flight.args);
        if (!(response instanceof Response)) {
          throw new TypeError(
            `The handler must return a Response: it returned ${response}`,
          );
        }
      } catch (error) {
        await unit?.rollback();
        await this.#completions.release(beat, "thrown");
        throw error;
      }
      if (!this.#cacheable(response)) {
        await unit?.rollback();
        await this.#completions.release(beat, "not_cacheable");
        return response;
      }
      // From here the beat is the completion's to stop.
      return await this.#settle(flight, response, unit);
    } finally {
      this.#settleTime.observe(this.#config.clock.now() - running);
      this.#waiters?.settled(slot!);
    }
  }

  #cacheable(response: Response): boolean {
    try {
      return this.#config.cacheable(response);
    } catch {
      // docs/architecture.md, Terminal rule: a throw counts as cacheable.
      return true;
    }
  }

  /** See docs/architecture.md, Terminal rule and Body integrity. */
  async #settle(
    flight: Flight<A>,
    response: Response,
    unit?: UnitOfWork,
  ): Promise<Response> {
    const beat = flight.beat!;
    const { slot, started } = flight;
    const { status, statusText } = response;
    const { pairs: headers, partial, typed } = storedHeaders(
      response.headers,
      this.#config.unstoredHeaders,
    );
    const cap = this.#config.maxResponseBytes;
    const captured = await responseBody(
      response,
      cap,
      () => this.#heartbeat.capturing(beat),
    );
    if (captured === null) {
      const record = { status, headers, body: EMPTY };
      const refused = await this.#record(flight, unit, record);
      return refused ?? this.#advertised(flight, response);
    }
    if (captured.outcome === "within") {
      const body = captured.bytes;
      const record = { status, headers, body };
      const refused = await this.#record(flight, unit, record);
      if (refused !== null) return refused;
      // The record's pairs, unless it left some out: one pass, not two.
      return this.#advertised(
        flight,
        new Response(bodyInit(body, typed), {
          status,
          statusText,
          headers: partial ? response.headers : headers,
        }),
      );
    }
    if (captured.outcome === "overflow") {
      this.#report(() => ({ type: "overflow", slot, cap }), started);
    } else if (captured.outcome === "failed") {
      const { error } = captured;
      this.#report(() => ({ type: "body_error", slot, error }), started);
    }
    const { omitted, live } = captured;
    const record = { status, headers, body: null, omitted };
    const refused = await this.#record(flight, unit, record);
    if (refused !== null) {
      live.cancel().catch(() => {});
      return refused;
    }
    return this.#advertised(
      flight,
      new Response(live, { status, statusText, headers: response.headers }),
    );
  }

  /** A recorded response or its replay, with the key's lifetime when `advertiseLifetime`. */
  #advertised(flight: Flight<A>, live: Response): Response {
    if (!this.#config.advertiseLifetime) return live;
    const seconds = `${Math.floor(flight.lifetime!.ttlMs / 1000)}`;
    return withHeader(live, LIFETIME_HEADER, seconds);
  }

  /** Writes the record; a problem when the handler's transaction did not commit. */
  async #record(
    flight: Flight<A>,
    unit: UnitOfWork | undefined,
    record: StoredResponse,
  ): Promise<Response | null> {
    const { beat, fingerprint, request } = flight as Required<Flight<A>>;
    const completions = this.#completions;
    if (unit?.opened) {
      return await completions.commit(unit, beat, record, fingerprint, request);
    }
    await completions.complete(beat, record, fingerprint);
    return null;
  }

  drain(): Promise<void> {
    return this.#completions.drain();
  }
}
