// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The memory a full MemoryStore really holds, measured after GC in a
 * process of its own (`tests/_support/memory_bound.ts`, run with `--expose-gc`):
 * at most what it counts against `maxBytes` plus
 * `MemoryStore.RECORD_OVERHEAD_BYTES` a record.
 *
 * GC noise: a reading may exceed the bound by at most `NOISE` bytes (code
 * compiled during the fill, allocator rounding). With 20,000 records that
 * is 13 bytes a record; the largest case holds 67 MB.
 */
import assert from "node:assert/strict";
import { MemoryStore } from "../../src/stores/memory.ts";

const NOISE = 262_144;
const MiB = 1_048_576;
const N = MemoryStore.RECORD_OVERHEAD_BYTES;

interface Reading {
  held: number;
  entries: number;
  counted: number;
}

async function measure(name: string): Promise<Reading> {
  const script = new URL("../_support/memory_bound.ts", import.meta.url);
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--v8-flags=--expose-gc,--single-threaded-gc",
      script.href,
      name,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  assert.equal(code, 0, decoder.decode(stderr));
  return JSON.parse(decoder.decode(stdout));
}

function perRecord({ held, counted, entries }: Reading): string {
  return `${held} bytes held, ${counted} counted, ${entries} records: ${
    ((held - counted) / entries).toFixed(0)
  } bytes a record beside what is counted`;
}

Deno.test("MemoryStore holds at most maxBytes of 1 MiB bodies (300 completions, maxBytes 8 MiB)", async () => {
  const reading = await measure("large");
  assert.ok(reading.counted <= 8 * MiB, perRecord(reading));
  assert.ok(
    reading.held <= 8 * MiB + reading.entries * N + NOISE,
    perRecord(reading),
  );
});

Deno.test("MemoryStore never keeps a larger buffer alive through a body that is a view into it", async () => {
  // 300 bodies of 64 KiB, each a view into a 1 MiB buffer: ~19 MiB, not 300.
  const reading = await measure("views");
  assert.ok(
    reading.held <= reading.counted + reading.entries * N + NOISE,
    perRecord(reading),
  );
  assert.ok(reading.held < 24 * MiB, perRecord(reading));
});

Deno.test(`MemoryStore costs at most ${N} bytes a completed record beside its counted bytes (20,000 tiny bodies at maxEntries)`, async () => {
  const reading = await measure("tiny");
  assert.equal(reading.entries, 20_000);
  assert.ok(
    reading.held <= reading.counted + reading.entries * N + NOISE,
    perRecord(reading),
  );
});

Deno.test(`MemoryStore counts what a header list of its own costs (20,000 records, each with its own cookie)`, async () => {
  const reading = await measure("cookies");
  assert.equal(reading.entries, 20_000);
  assert.ok(
    reading.held <= reading.counted + reading.entries * N + NOISE,
    perRecord(reading),
  );
});

Deno.test(`MemoryStore costs at most ${N} bytes a live claim (20,000 claims at maxEntries)`, async () => {
  const reading = await measure("claims");
  assert.equal(reading.entries, 20_000);
  assert.equal(reading.counted, 0);
  assert.ok(reading.held <= reading.entries * N + NOISE, perRecord(reading));
});

Deno.test("idempotency() with its default MemoryStore holds at most 64 MiB of 1,000,000-byte responses", async () => {
  // 150 keyed requests: 143 MB of responses went through.
  const reading = await measure("http");
  assert.ok(
    reading.held <= 64 * MiB + reading.entries * N + 4 * NOISE,
    `${reading.held} bytes held`,
  );
});
