// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Requests per second over loopback HTTP: the bare app against the same app
 * under `idempotency()` (MemoryStore), keyless, with a fresh key per request,
 * and replaying one key; the floor of a keyless request (`keyless-floor`: the
 * bare app that also reads the method and the key's header, all the middleware
 * does with it); the floor of a fresh key: what the platform
 * costs for the middleware's body reads and rebuilt request and response,
 * without a hash or a store (`floor` in `_http_server.ts`), sent the fresh
 * case's requests; and the floor of a replay (`replay-floor`: the body read
 * and bounded, the replay built from a record in memory), sent the replay
 * case's requests. Each case runs `wrk -t1 -c32` against its own server
 * process, in rounds that alternate the cases; the report gives the median of
 * the rounds and each case's ratio to the bare app measured in the same run,
 * and (where `/proc` has it) the server's CPU time per request, user and
 * system: on shared cores the ratios swing with the load, CPU time much less.
 *
 *     deno task bench:http [seconds per case] [rounds]
 *
 * Needs `wrk` on the PATH (Debian: `apt-get install wrk`).
 *
 * @module
 */
// deno-lint-ignore-file no-console

import { freePort, listening } from "../tests/_support/services.ts";
import { waitFor } from "../tests/_support/time.ts";
import { interleaved, markdownTable, median, ratio } from "./_measure.ts";

const seconds = Number(Deno.args[0] ?? 5);
const rounds = Number(Deno.args[1] ?? 3);
const body = JSON.stringify({
  amount: 1999,
  currency: "eur",
  customer: "cus_8fQ2",
  note: "x".repeat(64),
});

const scripts = {
  keyless: `wrk.method = "POST"
wrk.body = '${body}'
wrk.headers["Content-Type"] = "application/json"`,
  fresh: `wrk.method = "POST"
wrk.body = '${body}'
local n = 0
local prefix = tostring(math.random(1, 1e9))
request = function()
  n = n + 1
  return wrk.format(nil, nil, { ["Content-Type"] = "application/json", ["Idempotency-Key"] = prefix .. "-" .. n }, nil)
end`,
  replay: `wrk.method = "POST"
wrk.body = '${body}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Idempotency-Key"] = "the-same-key"`,
};

type Case =
  | "bare"
  | "keyless"
  | "keyless-floor"
  | "fresh"
  | "replay"
  | "floor"
  | "replay-floor";
const cases: Case[] = [
  "bare",
  "keyless",
  "keyless-floor",
  "fresh",
  "replay",
  "floor",
  "replay-floor",
];
/** An empty list per case. */
function perCase(): Record<Case, number[]> {
  return Object.fromEntries(cases.map((c) => [c, []])) as unknown as Record<
    Case,
    number[]
  >;
}
/** Each case's server CPU time per request (user + system), where `/proc` has it. */
const cpu = perCase();
/** Each case's requests/s, a round at a time. */
const results = perCase();
const dir = await Deno.makeTempDir();

/**
 * A process's CPU time so far in clock ticks (1/100 s), or NaN without
 * `/proc`. Read through `cat`: Deno reads another process's `/proc` entry
 * only with `--allow-all`.
 */
async function cpuTicks(pid: number): Promise<number> {
  try {
    const out = await new Deno.Command("cat", {
      args: [`/proc/${pid}/stat`],
      stdout: "piped",
      stderr: "null",
    }).output();
    const stat = new TextDecoder().decode(out.stdout);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return NaN;
  }
}

async function measure(which: Case, port: number): Promise<number> {
  const server = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net=127.0.0.1",
      new URL("./_http_server.ts", import.meta.url).pathname,
      which === "bare" || which === "floor" || which === "replay-floor" ||
        which === "keyless-floor"
        ? which
        : "guarded",
      String(port),
    ],
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  try {
    await waitFor(`the server on ${port}`, () => listening(port));
    const script = `${dir}/${which}.lua`;
    await Deno.writeTextFile(
      script,
      which === "bare" || which === "keyless-floor"
        ? scripts.keyless
        : which === "floor"
        ? scripts.fresh
        : which === "replay-floor"
        ? scripts.replay
        : scripts[which],
    );
    const url = `http://127.0.0.1:${port}/payments`;
    const warm = ["-t1", "-c32", "-d1s", "-s", script, url];
    await new Deno.Command("wrk", { args: warm, stdout: "null" }).output();
    const before = await cpuTicks(server.pid);
    const out = await new Deno.Command("wrk", {
      args: ["-t1", "-c32", `-d${seconds}s`, "-s", script, url],
      stdout: "piped",
    }).output();
    const after = await cpuTicks(server.pid);
    const text = new TextDecoder().decode(out.stdout);
    const requests = Number(text.match(/(\d+) requests in/)?.[1]);
    cpu[which].push((after - before) * 10_000 / requests);
    const rps = Number(text.match(/Requests\/sec:\s+([\d.]+)/)?.[1]);
    const non2xx = Number(
      text.match(/Non-2xx or 3xx responses:\s+(\d+)/)?.[1] ?? 0,
    );
    if (non2xx > 0) console.error(`${which}: ${non2xx} non-2xx responses`);
    return rps;
  } finally {
    server.kill();
    await server.status;
  }
}

await interleaved(cases, rounds, async (which) => {
  results[which].push(await measure(which, freePort()));
});
await Deno.remove(dir, { recursive: true });

const bare = median(results.bare);
console.log(
  `wrk -t1 -c32, ${seconds} s per case, median of ${rounds} rounds, MemoryStore\n`,
);
console.log(markdownTable(
  [
    "case",
    "requests/s",
    "× bare",
    "µs added per request",
    "server CPU µs/request",
  ],
  cases.map((which) => {
    const rps = median(results[which]);
    const added = which === "bare" ? "" : (1e6 / rps - 1e6 / bare).toFixed(1);
    const time = median(cpu[which]);
    return [
      which,
      rps.toFixed(0),
      ratio(rps, bare).toFixed(2),
      added,
      Number.isNaN(time) ? "" : time.toFixed(1),
    ];
  }),
  ["---", "---:", "---:", "---:", "---:"],
));
