// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * MysqlStore's slots and records, as properties (fast-check) against the
 * real server: slots that a collation would merge (case, trailing spaces,
 * NUL, NFC against NFD) stay apart, because the slot is compared byte for
 * byte (VARBINARY); every record replays exactly as completed.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import type { StoredResponse } from "../../src/store.ts";
import { OMITTED_REASONS } from "../../src/stores/_shared.ts";
import { myTest, opts, withStore } from "./_mysql_fixtures.ts";

const headerName = fc.stringMatching(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,20}$/);
const headerValue = fc.stringMatching(/^[\t\x20-\x7e\x80-\xff]{0,40}$/);
const storedResponse: fc.Arbitrary<StoredResponse> = fc.oneof(
  fc.record({
    status: fc.integer({ min: 200, max: 599 }),
    headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 6 }),
    body: fc.uint8Array({ maxLength: 300 }),
  }),
  fc.record({
    status: fc.integer({ min: 200, max: 599 }),
    headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 3 }),
    body: fc.constant(null),
    omitted: fc.constantFrom(...OMITTED_REASONS),
  }),
);

/** A slot and the near twins a case- or pad-insensitive comparison would merge. */
const slotFamily = fc.string({ unit: "grapheme", minLength: 1, maxLength: 30 })
  .filter((s) => new TextEncoder().encode(s).byteLength <= 200)
  .map((s) => [
    s,
    s.toUpperCase(),
    s.toLowerCase(),
    `${s} `,
    `${s}\0`,
    s.normalize("NFD"),
    s.normalize("NFC"),
  ]);

myTest(
  "MysqlStore keeps slots apart byte for byte and replays every record exactly (property)",
  () =>
    withStore({ connectionLimit: 4 }, async (store) => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          slotFamily,
          fc.array(storedResponse, { minLength: 7, maxLength: 7 }),
          async (family, responses) => {
            const prefix = `p${run++}:`;
            const slots = [...new Set(family)].map((s) => prefix + s);
            const tokens: string[] = [];
            for (const [i, slot] of slots.entries()) {
              const claim = await store.claim(slot, opts(`fp-${i}`));
              assert.equal(claim.state, "acquired", JSON.stringify(slot));
              if (claim.state === "acquired") tokens.push(claim.token);
            }
            for (const [i, slot] of slots.entries()) {
              const done = await store.complete(
                slot,
                tokens[i]!,
                responses[i]!,
              );
              assert.equal(done, "applied");
            }
            for (const [i, slot] of slots.entries()) {
              const replay = await store.claim(slot, opts("other"));
              assert.equal(replay.state, "completed");
              if (replay.state !== "completed") continue;
              assert.equal(replay.fingerprint, `fp-${i}`);
              const expected = responses[i]!;
              assert.equal(replay.response.status, expected.status);
              assert.deepEqual(replay.response.headers, expected.headers);
              assert.deepEqual(
                replay.response.body === null
                  ? null
                  : [...replay.response.body],
                expected.body === null ? null : [...expected.body],
              );
              assert.equal(replay.response.omitted, expected.omitted);
            }
          },
        ),
        { numRuns: 25 },
      );
    }),
);
