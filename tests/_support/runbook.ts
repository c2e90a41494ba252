// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The machinery of tests/operations_test.ts (whose module doc states the
 * runbook blocks' grammar): the app run as a subprocess with its log
 * captured, and a runbook block run step by step in a situation.
 *
 * @module
 */

import { freePort, listening } from "./http.ts";
import { expandWords, matchOutput } from "./markdown.ts";
import type { OtlpReceiver } from "./otlp.ts";
import { waitFor } from "./time.ts";

const ROOT = new URL("../../", import.meta.url);
const APP = new URL("tests/_support/operations_app.ts", ROOT);
/** The package's `./cli` entry, where deno.json's exports put it. */
const CLI = new URL(
  (JSON.parse(await Deno.readTextFile(new URL("deno.json", ROOT))) as {
    exports: Record<string, string>;
  }).exports["./cli"]!,
  ROOT,
);
const decoder = new TextDecoder();

/** The app of tests/_support/operations_app.ts, running: see {@linkcode startApp}. */
export interface App {
  /** Where it listens. */
  readonly port: number;
  /** Every line it wrote so far, stdout and stderr. */
  readonly lines: string[];
  /** Waits until a line matches `pattern` (`…` matches anything); returns it. */
  waitForLine(pattern: string, ms?: number): Promise<string>;
  /** Sends a keyed `POST /payments` as the examples' client does. */
  pay(key: string, account?: string, amount?: number): Promise<Answer>;
  /** SIGKILL, as a crash; waits for the process to end. */
  kill(): Promise<void>;
  /** SIGTERM; waits for the process to end. Idempotent. */
  stop(): Promise<void>;
}

/** What a request got: the status, the problem type's anchor, and the body. */
export interface Answer {
  status: number;
  /** The anchor of a problem's `type` (`problem-store-unavailable`), or null. */
  problem: string | null;
  replayed: boolean;
  retryAfter: string | null;
  body: string;
}

/** The pattern of a `# ` line: `…` matches anything, the rest is literal. */
export function linePattern(text: string): RegExp {
  return new RegExp(
    `^${
      text.trim().split("…").map((p) =>
        p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      )
        .join(".*")
    }$`,
  );
}

/**
 * Starts the app with `env` (its `RUNBOOK_STORE`, servers, keys) on a free
 * port and waits until it listens; fails with its output if it exits first.
 *
 * @param env The app's environment (see tests/_support/operations_app.ts).
 * @returns The running app.
 */
export async function startApp(env: Record<string, string>): Promise<App> {
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net", "--allow-env", APP.pathname],
    cwd: ROOT.pathname,
    env: { NO_COLOR: "1", ...env, DENO_SERVE_ADDRESS: `tcp:127.0.0.1:${port}` },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const read = async (stream: ReadableStream<Uint8Array>) => {
    let rest = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop()!;
      lines.push(...parts);
    }
    if (rest !== "") lines.push(rest);
  };
  const drained = Promise.all([read(child.stdout), read(child.stderr)]);
  let exited = false;
  const status = child.status.then(async (s) => {
    exited = true;
    await drained;
    return s;
  });
  const end = async (signal: Deno.Signal) => {
    try {
      child.kill(signal);
    } catch { /* already gone */ }
    await status;
  };
  try {
    await waitFor(
      `the app (${env.RUNBOOK_STORE}) to listen`,
      async () => {
        if (exited) {
          throw new Error(
            `the app exited (${(await status).code}):\n${lines.join("\n")}`,
          );
        }
        return await listening(port);
      },
      60_000,
    );
  } catch (error) {
    await end("SIGKILL");
    throw error;
  }
  return {
    port,
    lines,
    async waitForLine(pattern, ms = 30_000) {
      const re = linePattern(pattern);
      const found = () => lines.find((l) => re.test(l.trim()));
      try {
        await waitFor(`a line ${JSON.stringify(pattern)}`, () => !!found(), ms);
      } catch {
        throw new Error(
          `no line ${JSON.stringify(pattern)} in the app's output:\n${
            lines.join("\n")
          }`,
        );
      }
      return found()!;
    },
    async pay(key, account = "sk_test_alice", amount = 1999) {
      const res = await fetch(`http://127.0.0.1:${port}/payments`, {
        method: "POST",
        headers: {
          "idempotency-key": key,
          authorization: `Bearer ${account}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ amount }),
      });
      const body = await res.text();
      const type = res.headers.get("content-type")?.includes("problem")
        ? (JSON.parse(body) as { type?: string }).type ?? ""
        : null;
      return {
        status: res.status,
        problem: type === null ? null : type.slice(type.indexOf("#") + 1),
        replayed: res.headers.get("idempotent-replayed") === "true",
        retryAfter: res.headers.get("retry-after"),
        body,
      };
    },
    kill: () => end("SIGKILL"),
    stop: () => end("SIGTERM"),
  };
}

/** A situation of the runbook, made real: what its block's steps act on. */
export interface Situation {
  /** The variables its block may use (`$REDIS_URL`, `$KEY`, …). */
  vars: Record<string, string>;
  /** The environment of its `idem` commands beside the test's (the app's keys). */
  env?: Record<string, string>;
  /** The app serving now (`# log:` reads its output, `# answer:` asks it). */
  app(): App;
  /** Where the app's metrics go. */
  receiver: OtlpReceiver;
  /** The keyed request `# answer:` sends: the same one each time. */
  request(app: App): Promise<Answer>;
  /** The changes `# once: TEXT` names, by TEXT. */
  once?: Record<string, () => Promise<void>>;
}

/** One step of a runbook block. */
export type Step =
  | { kind: "set"; name: string; value: string; line: string }
  | {
    kind: "answer";
    status: number;
    problem: string | null;
    replayed: boolean;
    /** Whether the answer must have no `Retry-After` (else not looked at). */
    noRetryAfter: boolean;
    line: string;
  }
  | { kind: "log" | "no log"; text: string; line: string }
  | {
    kind: "metric";
    name: string;
    where: Record<string, string>;
    line: string;
  }
  | { kind: "once"; text: string; line: string }
  | {
    kind: "idem";
    command: string;
    exit: number;
    expected: string[];
    line: string;
  };

const DIRECTIVE =
  /^#\s*(answer|log|no log|metric|once|exit):\s*(.*)$|^#\s*(exit)\s+(\d+)$/;

/**
 * Reads a runbook block into its steps (the grammar: tests/operations_test.ts).
 *
 * @param text The block's text.
 * @returns The steps, in order.
 * @throws {SyntaxError} On a line the grammar does not have.
 */
export function stepsOf(text: string): Step[] {
  const steps: Step[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "") continue;
    const last = steps.at(-1);
    if (line.startsWith("#")) {
      const d = DIRECTIVE.exec(line);
      const word = d?.[1] ?? d?.[3];
      const rest = (d?.[2] ?? d?.[4] ?? "").trim();
      if (word === "exit") {
        if (last?.kind !== "idem" || !/^\d+$/.test(rest)) {
          throw new SyntaxError(`'# exit N' follows an idem command: ${line}`);
        }
        last.exit = Number(rest);
      } else if (word === "answer") {
        const m =
          /^(\d{3})(?:\s+(problem-[\w-]+))?(\s+replayed)?(\s+without Retry-After)?$/
            .exec(rest);
        if (m === null) {
          throw new SyntaxError(
            `'# answer: STATUS [problem-…] [replayed] [without Retry-After]': ${line}`,
          );
        }
        steps.push({
          kind: "answer",
          status: Number(m[1]),
          problem: m[2] ?? null,
          replayed: m[3] !== undefined,
          noRetryAfter: m[4] !== undefined,
          line,
        });
      } else if (word === "log" || word === "no log") {
        steps.push({ kind: word, text: rest, line });
      } else if (word === "metric") {
        const [name, ...pairs] = rest.split(/\s+/);
        const where: Record<string, string> = {};
        for (const pair of pairs) {
          const eq = pair.indexOf("=");
          if (eq < 1) throw new SyntaxError(`'# metric: NAME [k=v…]': ${line}`);
          where[pair.slice(0, eq)] = pair.slice(eq + 1);
        }
        if (!name) throw new SyntaxError(`'# metric: NAME [k=v…]': ${line}`);
        steps.push({ kind: "metric", name, where, line });
      } else if (word === "once") {
        steps.push({ kind: "once", text: rest, line });
      } else if (last?.kind === "idem") {
        last.expected.push(line.replace(/^#\s?/, ""));
      } else {
        throw new SyntaxError(
          `a '# ' line that is no directive must follow an idem command: ${line}`,
        );
      }
      continue;
    }
    const set = /^([A-Z_][A-Z0-9_]*)=("?)(.*)\2$/.exec(line);
    if (set !== null) {
      steps.push({ kind: "set", name: set[1]!, value: set[3]!, line });
    } else if (/^idem\s/.test(line)) {
      steps.push({ kind: "idem", command: line, exit: 0, expected: [], line });
    } else {
      throw new SyntaxError(`not a runbook step: ${line}`);
    }
  }
  return steps;
}

/** The output and exit code of one `idem` command. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI (this checkout's `./cli` entry, as the `idem` alias does) with
 * `args`.
 *
 * @param args The words after `idem`.
 * @param env Variables beside the test's environment.
 * @returns What it printed and its exit code.
 */
export async function idem(
  args: string[],
  env: Record<string, string> = {},
): Promise<CliRun> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", CLI.pathname, ...args],
    cwd: ROOT.pathname,
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    stdout: decoder.decode(out.stdout),
    stderr: decoder.decode(out.stderr),
  };
}

/**
 * Runs a block's steps in `situation`, in order, each checked before the
 * next: a variable is set, a request answered, a log line or data point
 * waited for, a change made, a command run and its output matched.
 *
 * @param where The block's place, for messages (`docs/operations.md:120`).
 * @param text The block's text.
 * @param situation The situation, set up.
 */
export async function runBlock(
  where: string,
  text: string,
  situation: Situation,
): Promise<void> {
  const vars = { ...situation.vars };
  const fail = (step: Step, message: string) =>
    new Error(`${where}: ${step.line}\n${message}`);
  for (const step of stepsOf(text)) {
    switch (step.kind) {
      case "set":
        vars[step.name] = step.value.replace(
          /\$([A-Z_][A-Z0-9_]*)/g,
          (_, name) => {
            const v = vars[name];
            if (v === undefined) throw fail(step, `$${name} is not set`);
            return v;
          },
        );
        break;
      case "answer": {
        const got = await situation.request(situation.app());
        const want = {
          status: step.status,
          problem: step.problem,
          replayed: step.replayed,
          retryAfter: null,
        };
        const have = {
          status: got.status,
          problem: step.problem === null ? null : got.problem,
          replayed: got.replayed,
          retryAfter: step.noRetryAfter ? got.retryAfter : null,
        };
        if (JSON.stringify(have) !== JSON.stringify(want)) {
          throw fail(
            step,
            `the request got ${got.status}${
              got.replayed ? " (replayed)" : ""
            }, Retry-After ${got.retryAfter}: ${got.body}`,
          );
        }
        break;
      }
      case "log":
        await situation.app().waitForLine(step.text).catch((error) => {
          throw fail(step, (error as Error).message);
        });
        break;
      case "no log": {
        const pattern = linePattern(step.text);
        const found = situation.app().lines.find((l) => pattern.test(l.trim()));
        if (found !== undefined) throw fail(step, `the app wrote: ${found}`);
        break;
      }
      case "metric":
        await situation.receiver.waitForPoint(step.name, step.where).catch(
          (error) => {
            throw fail(step, (error as Error).message);
          },
        );
        break;
      case "once": {
        const change = situation.once?.[step.text];
        if (change === undefined) {
          throw fail(
            step,
            `this situation knows no change ${
              JSON.stringify(step.text)
            }; it knows: ${Object.keys(situation.once ?? {}).join("; ")}`,
          );
        }
        await change();
        break;
      }
      case "idem": {
        const words = expandWords(step.command, vars);
        const run = await idem(words.slice(1), situation.env);
        const output = `${run.stdout}\n${run.stderr}`;
        if (run.code !== step.exit) {
          throw fail(step, `exited ${run.code}, not ${step.exit}:\n${output}`);
        }
        const mismatch = matchOutput(output, step.expected);
        if (mismatch !== null) throw fail(step, mismatch);
        break;
      }
    }
  }
}

/** The runbook blocks of a document, by situation name. */
export function runbookBlocks(
  blocks: {
    marker: string[] | null;
    line: number;
    lang: string;
    text: string;
  }[],
): Map<string, { line: number; lang: string; text: string }[]> {
  const found = new Map<
    string,
    { line: number; lang: string; text: string }[]
  >();
  for (const block of blocks) {
    if (block.marker?.[0] !== "runbook") continue;
    const name = block.marker[1] ?? "";
    found.set(name, [...(found.get(name) ?? []), block]);
  }
  return found;
}
