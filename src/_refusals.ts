// Copyright 2026 the @idempotent/http authors. MIT license.
/** The guard's refusals: each problem with its event (docs/architecture.md, Problems). @module */

import { type Config, lifetimeOf } from "./_configure.ts";
import type { Unread } from "./_request.ts";
import type { EventDraft, Report } from "./events.ts";
import { parseIdempotencyKey } from "./key.ts";
import {
  type ProblemDetails,
  problemResponse,
  problemStatus,
} from "./problem.ts";

/** What a refusal reads of its request, and the key and lifetime `checked` sets. */
export interface Refused {
  readonly request: Request;
  readonly started: number;
  readonly slot: string | null;
  key?: string;
  lifetime?: { ttlMs: number; leaseMs: number };
}

/** One middleware's refusals, each reported through its `report`. */
export class Refusals {
  #config: Config;
  #report: Report;

  constructor(config: Config, report: Report) {
    this.#config = config;
    this.#report = report;
  }

  /**
   * Parses the key into `flight.slot`'s input and sets its lifetime, or
   * answers: 400 for a malformed key, 500 for a lifetime function's failure.
   */
  checked(
    flight: Refused,
    value: string,
    by: string,
  ): Response | Promise<Response> | undefined {
    const { header } = this.#config;
    const parsed = parseIdempotencyKey(value);
    if (!parsed.ok) {
      const reason = `${parsed.reason}${by}`;
      return this.refuse(flight, "malformed", { header, reason });
    }
    flight.key = parsed.key;
    const lifetime = lifetimeOf(this.#config, flight.request);
    if ("error" in lifetime) return this.misconfigured(flight, lifetime);
    flight.lifetime = lifetime;
    return undefined;
  }

  /** An option's function failed: never unguarded, a 500 and a line (docs/lifetimes.md). */
  misconfigured(
    flight: Refused,
    { error }: { error: unknown },
  ): Response | Promise<Response> {
    const event = () => ({ type: "option_error" as const, slot: null, error });
    return this.problem(flight, "misconfigured", {}, event);
  }

  /** Reports `event` and answers the problem `kind` (docs/architecture.md, Problems). */
  problem<K extends keyof ProblemDetails>(
    flight: Refused,
    kind: K,
    details: ProblemDetails[K],
    event: () => EventDraft,
  ): Response | Promise<Response> {
    this.#report(event, flight.started);
    const render = this.#config.renderProblem;
    return problemResponse(flight.request, kind, details, render);
  }

  mismatch(flight: Refused): Response | Promise<Response> {
    const { slot } = flight;
    return this.problem(
      flight,
      "reused",
      {},
      () => ({ type: "mismatch", slot }),
    );
  }

  /** The body was too large (413) or broke off mid-read (400). */
  unread(flight: Refused, unread: Unread): Response | Promise<Response> {
    const { header, maxRequestBytes } = this.#config;
    if (unread.outcome === "too_large") {
      return this.refuse(flight, "tooLarge", { header, maxRequestBytes });
    }
    const { error } = unread, reason = "incomplete", status = 400;
    const event = () => ({
      type: "rejected",
      slot: null,
      status,
      reason,
      error,
    });
    return this.problem(flight, reason, {}, event as () => EventDraft);
  }

  refuse<K extends "missing" | "malformed" | "tooLarge">(
    flight: Refused,
    kind: K,
    details: ProblemDetails[K],
  ): Response | Promise<Response> {
    const status = problemStatus(kind);
    const reason = kind === "tooLarge"
      ? "too_large"
      : kind as "missing" | "malformed";
    const event = () => ({
      type: "rejected" as const,
      slot: null,
      status,
      reason,
    });
    return this.problem(flight, kind, details, event as () => EventDraft);
  }
}
