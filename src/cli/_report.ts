// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The CLI's commands on the stores it opened (one, or a FailoverStore's two,
 * each asked on its own: docs/architecture.md, Inspect and forget), and what
 * they print.
 * @module
 */

import type { Parsed } from "./_args.ts";
import type { Opened } from "./_stores.ts";
import {
  forgetKey,
  inspectKey,
  inspectStats,
  type KeyForgotten,
  type KeyInspection,
  type RecordStats,
} from "../inspect.ts";
import type { EncryptionKeys } from "../encryption.ts";
import { claimFinds } from "../stores/_shared.ts";

/** Where the CLI writes. */
export interface Out {
  stdout(line: string): void;
  stderr(line: string): void;
}

/** What a command found on one store. */
export type Answer = KeyInspection | KeyForgotten | RecordStats;

/** Runs the parsed command on one opened store. */
export function ask(
  { command, slot, limit }: Parsed,
  { store, stats }: Opened,
  encryption: EncryptionKeys | undefined,
): Promise<Answer> {
  const keys = encryption && { encryption };
  if (command === "stats") {
    return inspectStats({ stats: () => stats(limit) }, { ...keys });
  }
  if (command === "forget") return forgetKey(store, { slot });
  return inspectKey(store, { slot, ...keys });
}

/**
 * Prints each store's answer (`names[i]` says whose; `null`: that store
 * failed, `failed[i]` says how, on stderr already) and returns the exit code,
 * which a failure then makes 3.
 */
export function report(
  parsed: Parsed,
  names: string[],
  values: (Answer | null)[],
  failed: (string | null)[],
  io: Out,
): number {
  const { command, json } = parsed;
  const both = values.length === 2;
  const sides = both
    ? Object.fromEntries(
      values.map((v, i) => [ROLES[i], v ?? { error: failed[i] }]),
    )
    : {};
  const write = (value: object) =>
    io.stdout(JSON.stringify({ ...value, ...sides }));
  if (command === "stats") {
    (values as (RecordStats | null)[]).forEach((stats, i) => {
      if (stats === null) return;
      const { unopened, exact } = stats;
      const of = both ? `${names[i]}: ` : "";
      if (unopened) {
        io.stderr(
          `warning: ${of}${unopened} completed records would not open with the keys given (sealed under another key id, or in clear): counted unreadable`,
        );
      }
      if (!exact) {
        io.stderr(
          `warning: ${of}the count stopped at its limit: the counts are a lower bound (raise --limit)`,
        );
      }
      if (!json) io.stdout(of + statsText(stats));
      if (stats.inFlight + stats.completed + stats.unreadable === 0) {
        io.stderr(`note: ${of}no records: is --prefix or --table the app's?`);
      }
    });
    if (json) write(both ? {} : values[0]!);
    return 0;
  }
  const label = labelOf(parsed.location!);
  const slot = parsed.slot;
  if (command === "forget") {
    const results = values.map((v) => (v as KeyForgotten | null)?.result);
    const result = results.includes("deleted") ? "deleted" : "absent";
    if (json) write({ slot, result });
    else if (!both) {
      io.stdout(
        result === "deleted"
          ? `deleted: ${label}; the next request with it runs the handler`
          : `absent: ${label} has no record (nothing deleted)`,
      );
    } else {
      io.stdout(label);
      io.stdout(row("slot", slot));
      results.forEach((r, i) => {
        const text = r === undefined
          ? "failed: a copy may be left (forget again)"
          : r === "deleted"
          ? "deleted"
          : "absent (nothing deleted)";
        io.stdout(`  ${names[i]}: ${text}`);
      });
      const failed = results.findIndex((r) => r === undefined);
      io.stdout(
        failed >= 0
          ? `not done: the ${
            ROLES[failed]
          } failed, and a copy there still answers its retries (forget again once it answers)`
          : result === "deleted"
          ? "deleted: the next request with it runs the handler"
          : "absent: no record on either store (nothing deleted)",
      );
    }
    if (!json && result === "absent") hint(parsed, io);
    return result === "deleted" ? 0 : 1;
  }
  const [p = null, f = null] = values as (KeyInspection | null)[];
  const finds = both ? claimFinds(p, f) : p;
  if (json) write(finds ?? {});
  else if (!both) { for (const line of peekText(label, p!)) io.stdout(line); }
  else {
    const whose = finds === null
      ? "nothing known: both stores failed"
      : finds.state === "absent"
      ? "no record: the next request runs the handler"
      : `the ${finds === p ? "primary" : "fallback"}'s record (${
        finds.state.replace("_", " ")
      })`;
    io.stdout(label);
    io.stdout(row("slot", slot));
    io.stdout(row("claim finds", whose));
    values.forEach((v, i) => {
      const lines = v
        ? peekText(names[i]!, v as KeyInspection).filter((l) =>
          !l.startsWith("  slot ")
        )
        : [names[i]!, row("state", "failed (see the error)")];
      for (const line of lines) io.stdout(line);
    });
  }
  if (!json && finds?.state === "absent") hint(parsed, io);
  return finds === null || finds.state === "absent" ? 1 : 0;
}

/** The roles of a FailoverStore's two stores, in the order they are given. */
export const ROLES = ["primary", "fallback"] as const;

/** What names the record, for the human output. */
function labelOf(location: NonNullable<Parsed["location"]>): string {
  if ("slot" in location) return `slot ${location.slot}`;
  const key = JSON.stringify(location.key);
  return location.global
    ? `key ${key} in the global scope (scope: "global")`
    : `key ${key} in scope ${JSON.stringify(location.scope)}`;
}

/**
 * After an absent record: `--scope global` for the option? And on stderr, the
 * other ways a record that exists reads absent.
 */
function hint({ location }: Parsed, io: Out): void {
  if (location && "scope" in location && location.scope === "global") {
    io.stdout(
      'hint: looked up the scope text "global"; for the scope: "global" option use --global',
    );
  }
  const slot =
    location && "slot" in location && !/^[0-9a-f]{64}$/.test(location.slot)
      ? ", the whole slot (64 hex digits, as an event gives it)"
      : "";
  io.stderr(
    `note: if the app holds this record, check the options against the app's: --prefix or --table, --secret-env when it sets 'secret'${slot}, and both stores of a FailoverStore`,
  );
}

/** `stats`' human line. */
function statsText(stats: RecordStats): string {
  const total = stats.inFlight + stats.completed + stats.unreadable;
  const bound = stats.exact ? "" : "at least ";
  return `${bound}${total} records: ${stats.inFlight} in flight, ${stats.completed} completed, ${stats.unreadable} unreadable`;
}

const row = (name: string, value: string) => `  ${name.padEnd(12)} ${value}`;

const STATES = {
  absent: "absent: no record (never claimed, expired or forgotten)",
  unreadable: "unreadable: answers 500 until it expires or is forgotten",
  "in_flight": "in flight: the handler runs, or ran and its write is due",
  completed: "completed: retries get this answer",
};

/** What the state row says of a sealed record (the `encryption` option). */
function sealedState(peek: KeyInspection): string {
  const id = JSON.stringify(peek.keyId ?? "?");
  if (peek.state === "unreadable") {
    return `unreadable: the app would not open it (${peek.reason}), so it answers 500 until it expires or is forgotten`;
  }
  return peek.verified
    ? `completed: retries get this answer (sealed under key id ${id}; it opens with the keys given)`
    : `completed, sealed and unverified: retries get this answer only if the app holds key id ${id}${
      peek.reason ? ` (${peek.reason})` : ""
    } (give --encryption-keys-env to check)`;
}

/** One record, a row a field, under `label`. */
function peekText(label: string, peek: KeyInspection): string[] {
  const state = peek.verified === undefined
    ? STATES[peek.state]
    : sealedState(peek);
  const rows = [["slot", peek.slot], ["state", state]];
  if (peek.state !== "absent") rows.push(["expires", time(peek.expiresAt)]);
  if (peek.state === "in_flight") {
    rows.splice(2, 0, ["claimed", time(peek.claimedAt)], [
      "lease ends",
      time(peek.leaseExpiresAt),
    ]);
  }
  if (peek.state === "completed") {
    const hidden = peek.sealed && !peek.verified;
    rows.splice(
      2,
      0,
      ["status", String(peek.status)],
      [
        "headers",
        hidden
          ? "sealed (the encryption option): names hidden"
          : peek.headerNames.join(", ") || "(none)",
      ],
      [
        "body",
        peek.bodyBytes === null
          ? `not recorded (${peek.omitted ?? "omitted"})`
          : `${peek.bodyBytes} bytes${hidden ? " as stored, sealed" : ""}`,
      ],
      ["claimed", time(peek.claimedAt)],
    );
  }
  if (peek.state === "in_flight" || peek.state === "completed") {
    rows.push(["fingerprint", peek.fingerprint]);
  }
  return [label, ...rows.map(([name, value]) => row(name!, value!))];
}

/**
 * `ms` as an ISO time and its distance from `now`: within a second either
 * way "just now" (a claim just made, on a server clock a little ahead, is
 * not "in 0 s"), else truncated toward now: "N s ago" for the past, "in N s"
 * only for the future; from 120 s on in minutes, from 2 h on in hours.
 */
export function time(ms: number | null, now: number = Date.now()): string {
  if (ms === null) return "(not kept by this store)";
  const diff = ms - now;
  const a = Math.trunc(Math.abs(diff) / 1000);
  const span = a < 120
    ? `${a} s`
    : a < 7200
    ? `${Math.round(a / 60)} min`
    : `${Math.round(a / 3600)} h`;
  const relative = a === 0
    ? "just now"
    : diff < 0
    ? `${span} ago`
    : `in ${span}`;
  return `${new Date(ms).toISOString()} (${relative})`;
}
