// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The CLI on a FailoverStore's two stores (`--redis` or `--redis-cluster`
 * with `--postgres`), each asked on its own (docs/architecture.md, Inspect
 * and forget), and the text both runs share.
 * @module
 */

import { type Parsed, UsageError } from "./_args.ts";
import { causes, open, type Opened, where } from "./_stores.ts";
import {
  forgetKey,
  inspectKey,
  inspectStats,
  type KeyForgotten,
  type KeyInspection,
} from "../inspect.ts";
import type { StoreStats } from "../store.ts";
import type { EncryptionKeys } from "../encryption.ts";
import { claimFinds, settle, type Settled } from "../stores/_failover_admin.ts";

/** Where the CLI writes. */
interface Out {
  stdout(line: string): void;
  stderr(line: string): void;
}

/** `stats`' human line. */
export function statsText(stats: StoreStats): string {
  const total = stats.inFlight + stats.completed + stats.unreadable;
  const bound = stats.exact ? "" : "at least ";
  return `${bound}${total} records: ${stats.inFlight} in flight, ${stats.completed} completed, ${stats.unreadable} unreadable`;
}

/** After an absent `--scope global`: the text "global" was meant, or the option? */
export function hint(record: Parsed["record"], io: Out): void {
  if (record && "scope" in record && record.scope === "global") {
    io.stdout(
      'hint: looked up the scope text "global"; for the scope: "global" option use --global',
    );
  }
}

const ROLES = ["primary", "fallback"] as const;

/**
 * Runs inspect, forget or stats on both stores at once: inspect shows each
 * record and what a claim would find (FailoverStore's rule), forget deletes
 * on both, stats counts each. A store unreachable or failed is named on
 * stderr and makes the exit 3, after the other store's answer.
 */
export async function runBoth(
  parsed: Parsed,
  io: Out,
  peekText: (label: string, peek: KeyInspection) => string[],
  encryption?: EncryptionKeys,
): Promise<number> {
  const { command, record, json, limit } = parsed;
  const target = parsed.target as Extract<
    Parsed["target"],
    { kind: "failover" }
  >;
  const targets = [target.primary, target.fallback];
  const opened = await Promise.all(targets.map((t) => settle(() => open(t))));
  try {
    const usage = opened.find((o) => !o.ok && o.error instanceof UsageError);
    if (usage && !usage.ok) throw usage.error;
    for (const o of opened) if (o.ok && o.value.note) io.stderr(o.value.note);
    const ask = <T>(call: (o: Opened) => Promise<T>) =>
      Promise.all(opened.map((o) => o.ok ? settle(() => call(o.value)) : o));
    const answers: Settled<unknown>[] = command === "stats"
      ? await ask((o) =>
        inspectStats({ stats: () => o.stats(limit) }, {
          ...(encryption && { encryption }),
        })
      )
      : command === "forget"
      ? await ask((o) => forgetKey(o.store, record!))
      : await ask((o) => inspectKey(o.store, { ...record!, encryption }));
    const side = (i: number) => `${ROLES[i]}: ${where(targets[i]!)}`;
    const failed = answers.map((a, i) => {
      if (a.ok) return null;
      const how = opened[i]!.ok ? "failed" : "is unreachable";
      const text = `${side(i)} ${how}: ${causes(a.error)}`;
      io.stderr(`error: ${text}`);
      return text;
    });
    const sides = Object.fromEntries(
      answers.map((a, i) => [ROLES[i], a.ok ? a.value : { error: failed[i] }]),
    );
    const code = command === "stats"
      ? stats(answers as Settled<StoreStats>[], side, json, io)
      : command === "forget"
      ? forget(answers as Settled<KeyForgotten>[], side, parsed, io)
      : inspect(
        answers as Settled<KeyInspection>[],
        side,
        parsed,
        peekText,
        io,
      );
    // JSON: inspect, what a claim finds; forget, the slot and result; then
    // "primary" and "fallback", each store's answer or {"error"}.
    if (json) io.stdout(JSON.stringify({ ...code.json, ...sides }));
    return failed.some((f) => f !== null) ? 3 : code.exit;
  } finally {
    for (const o of opened) if (o.ok) await o.value.close().catch(() => {});
  }
}

type Side = (i: number) => string;
type Done = { exit: number; json?: object };

function stats(
  answers: Settled<StoreStats>[],
  side: Side,
  json: boolean,
  io: Out,
): Done {
  answers.forEach((a, i) => {
    if (!a.ok) return;
    if (!a.value.exact) {
      io.stderr(
        `warning: ${
          side(i)
        }: the count stopped at its limit: a lower bound (raise --limit)`,
      );
    }
    if (!json) io.stdout(`${side(i)}: ${statsText(a.value)}`);
  });
  return { exit: 0 };
}

function forget(
  answers: Settled<KeyForgotten>[],
  side: Side,
  { label, record, json }: Parsed,
  io: Out,
): Done {
  const results = answers.map((a) => a.ok ? a.value.result : null);
  const slot = slotOf(answers);
  const result = results.includes("deleted") ? "deleted" : "absent";
  if (!json) {
    io.stdout(label);
    io.stdout(`  ${"slot".padEnd(12)} ${slot}`);
    results.forEach((r, i) => {
      const text = r === null
        ? "failed: a copy may be left (forget again)"
        : r === "deleted"
        ? "deleted"
        : "absent (nothing deleted)";
      io.stdout(`  ${side(i)}: ${text}`);
    });
    io.stdout(
      result === "deleted"
        ? "deleted: the next request with it runs the handler"
        : "absent: no record on either store (nothing deleted)",
    );
    if (result === "absent") hint(record, io);
  }
  return { exit: result === "deleted" ? 0 : 1, json: { slot, result } };
}

function inspect(
  answers: Settled<KeyInspection>[],
  side: Side,
  { label, record, json }: Parsed,
  peekText: (label: string, peek: KeyInspection) => string[],
  io: Out,
): Done {
  const [p = null, f = null] = answers.map((a) => a.ok ? a.value : null);
  const finds = claimFinds(p, f);
  if (!json) {
    const whose = finds === null
      ? "nothing known: both stores failed"
      : finds.state === "absent"
      ? "no record: the next request runs the handler"
      : `the ${finds === p ? "primary" : "fallback"}'s record (${
        finds.state.replace("_", " ")
      })`;
    io.stdout(label);
    io.stdout(`  ${"slot".padEnd(12)} ${slotOf(answers)}`);
    io.stdout(`  ${"claim finds".padEnd(12)} ${whose}`);
    answers.forEach((a, i) => {
      const lines = a.ok
        ? peekText(side(i), a.value).filter((l) => !l.startsWith("  slot "))
        : [side(i), `  ${"state".padEnd(12)} failed (see the error)`];
      for (const line of lines) io.stdout(line);
    });
    if (finds?.state === "absent") hint(record, io);
  }
  const exit = finds === null || finds.state === "absent" ? 1 : 0;
  return { exit, json: finds ?? {} };
}

/** The slot either store's answer names. */
function slotOf(answers: Settled<{ slot: string }>[]): string {
  const found = answers.find((a) => a.ok);
  return found?.ok ? found.value.slot : "(not known: both stores failed)";
}
