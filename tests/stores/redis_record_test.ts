// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * RedisStore's record as one string (`src/stores/_redis_record.ts`): every
 * response survives the round trip byte for byte, a damaged value never
 * decodes into another answer, and on a real Redis the lease rides on the
 * key's expiry, and a hash at the key (the layout of 0.1, never published)
 * reads as unreadable: in flight, and never overwritten.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import fc from "fast-check";
import {
  completedRecord,
  decodeCompleted,
  inFlightRecord,
  newToken,
  TOKEN_ID_LENGTH,
} from "../../src/stores/_redis_record.ts";
import { RedisStore } from "../../src/stores/redis.ts";
import type { StoredResponse } from "../../src/store.ts";
import { OMITTED_REASONS } from "../../src/stores/_shared.ts";
import { waitFor } from "../_support/services.ts";
import { redisTest } from "../_support/redis.ts";

const headerName = fc.stringMatching(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,20}$/);
const headerValue = fc.stringMatching(/^[\t\x20-\x7e\x80-\xff]{0,40}$/);

const storedResponse: fc.Arbitrary<StoredResponse> = fc.record({
  status: fc.integer({ min: 200, max: 599 }),
  headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 6 }),
  body: fc.uint8Array({ maxLength: 300 }),
}).chain((r) =>
  fc.oneof(
    fc.constant<StoredResponse>(r),
    fc.constantFrom(...OMITTED_REASONS).map((omitted): StoredResponse => ({
      status: r.status,
      headers: r.headers,
      body: null,
      omitted,
    })),
  )
);

/** Any well-formed string: what a fingerprint may be. */
const fingerprint = fc.string({ unit: "grapheme", maxLength: 80 });

Deno.test("A completed record decodes to the very response it was made of, and its body is a view into the value", () => {
  fc.assert(
    fc.property(storedResponse, fingerprint, (response, fp) => {
      const token = newToken(fp);
      assert.equal(token.length, TOKEN_ID_LENGTH + fp.length);
      const value = completedRecord(token, response)!;
      const decoded = decodeCompleted(value);
      assert.ok(decoded !== null);
      assert.equal(decoded.fingerprint, fp);
      assert.deepEqual(decoded.response, { ...response });
      if (decoded.response.body !== null && decoded.response.body.length > 0) {
        assert.equal(decoded.response.body.buffer, value.buffer);
        // A plain Uint8Array, not the Buffer it came from.
        assert.equal(
          Object.getPrototypeOf(decoded.response.body),
          Uint8Array.prototype,
        );
      }
      // A client that hands back a plain Uint8Array (or a copy) reads the same.
      assert.deepEqual(
        decodeCompleted(new Uint8Array(value))?.response,
        { ...response },
      );
    }),
  );
});

Deno.test("A fingerprint or header text of any UTF-16 units (lone surrogates too) still makes a well-formed record", () => {
  fc.assert(
    fc.property(
      fc.string({ unit: "binary", maxLength: 40 }),
      fc.string({ unit: "binary", maxLength: 40 }),
      (fp, value) => {
        const response = {
          status: 200,
          headers: [["x", value]] as [string, string][],
          body: new Uint8Array([1]),
        };
        const record = completedRecord(newToken(fp), response)!;
        const decoded = decodeCompleted(record);
        // Lone surrogates are written as U+FFFD, as any encoder would; a
        // value past Latin-1 then fails the HTTP check, never the layout.
        const written = Buffer.from(fp).toString();
        if (/^[\t\x20-\x7e\x80-\xff]*$/.test(value)) {
          assert.equal(decoded?.fingerprint, written);
        } else {
          assert.equal(decoded, null);
        }
      },
    ),
  );
});

Deno.test("A completed record cut short, run long, or with any byte changed before its body never decodes into another answer, and never throws", () => {
  fc.assert(
    fc.property(
      storedResponse,
      fingerprint,
      fc.nat(),
      fc.integer({ min: 0, max: 255 }),
      (response, fp, at, byte) => {
        const value = completedRecord(newToken(fp), response)!;
        const cut = at % value.length;
        assert.equal(
          decodeCompleted(value.subarray(0, cut)),
          null,
          `cut at ${cut}`,
        );
        assert.equal(
          decodeCompleted(Buffer.concat([value, Buffer.from([byte])])),
          null,
          "one byte more",
        );
        const bodyStart = value.length - (response.body?.length ?? 0);
        if (cut >= bodyStart) return;
        const changed = Buffer.from(value);
        changed[cut] = byte;
        const decoded = decodeCompleted(changed);
        if (decoded === null || byte === value[cut]) return;
        // A changed length or structure byte is caught; what can still
        // decode is a changed character inside the fingerprint, the status
        // or a header value, which the checks of a replayable record pass.
        assert.equal(decoded.response.body?.length, response.body?.length);
      },
    ),
  );
});

Deno.test("Random bytes, and the in-flight layout, never decode as a completed record", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
      const decoded = decodeCompleted(bytes);
      if (decoded !== null) {
        assert.ok(new TextDecoder().decode(bytes.subarray(0, 6)) === "idem2c");
      }
    }),
  );
  const flight = inFlightRecord(newToken("fp"), 1_000, 60_000);
  assert.equal(flight.slice(0, 16), "idem2f59000:" + flight.slice(12, 16));
  assert.equal(decodeCompleted(new TextEncoder().encode(flight)), null);
});

Deno.test("A token too short to carry a fingerprint makes no record", () => {
  const response = { status: 200, headers: [], body: new Uint8Array() };
  assert.equal(completedRecord("t", response), null);
});

const opts = { fingerprint: "fp", leaseMs: 5_000, ttlMs: 60_000 };

redisTest(
  "RedisStore on Redis: the lease rides on the key's expiry, and extend moves it on the server's clock",
  "record_lease",
  async (client, prefix) => {
    const store = new RedisStore({ client, prefix });
    // Leases far longer than any pause of a loaded machine: what is
    // asserted holds whatever the claims in between take.
    const first = await store.claim("s", { ...opts, leaseMs: 10_000 });
    assert.equal(first.state, "acquired");
    if (first.state !== "acquired") return;
    const busy = await store.claim("s", opts);
    assert.equal(busy.state, "in_flight");
    if (busy.state === "in_flight") {
      assert.equal(busy.fingerprint, "fp");
      assert.ok(busy.retryAfterMs >= 1 && busy.retryAfterMs <= 10_000);
    }
    const before = await client.pTTL(`${prefix}s`);
    // Renewed to 40 s: what is left is the new lease, not the old.
    assert.equal(await store.extend("s", first.token, 40_000), "applied");
    const renewed = await store.claim("s", opts);
    assert.equal(renewed.state, "in_flight");
    if (renewed.state === "in_flight") {
      assert.ok(renewed.retryAfterMs > 10_000, `${renewed.retryAfterMs}`);
    }
    // The deadline never moved.
    const after = await client.pTTL(`${prefix}s`);
    assert.ok(after > 0 && after <= before, `${before} ${after}`);
    // A short lease runs out on the server: taken over, recovered.
    const short = await store.claim("t", {
      ...opts,
      leaseMs: 50,
      ttlMs: 10_000,
    });
    assert.equal(short.state, "acquired");
    let taken: Awaited<ReturnType<RedisStore["claim"]>> | undefined;
    await waitFor("the lease to run out", async () => {
      taken = await store.claim("t", opts);
      return taken.state === "acquired";
    });
    assert.deepEqual({ ...taken, token: "" }, {
      state: "acquired",
      token: "",
      recovered: true,
    });
    // The takeover opened a new TTL window (60 s, where the first claim's
    // was 10 s).
    assert.ok(await client.pTTL(`${prefix}t`) > 10_000);
    if (short.state === "acquired") {
      assert.equal(await store.extend("t", short.token, 1_000), "lost");
    }
  },
);

redisTest(
  "RedisStore on Redis reads a hash at the key (0.1's layout) as unreadable: in flight whatever it holds, never overwritten",
  "record_v1",
  async (client, prefix) => {
    const at = (ms: number) => String(Date.now() + ms);
    const plant = async (slot: string, fields: Record<string, string>) => {
      await client.hSet(prefix + slot, fields);
      await client.pExpire(prefix + slot, 60_000);
    };
    const store = new RedisStore({ client, prefix });
    const base = { v: "1", fp: "old", tok: "t" };
    const hashes: Record<string, Record<string, string>> = {
      done: {
        ...base,
        st: "c",
        dl: at(60_000),
        status: "201",
        hdr: '[["content-type","text/plain"]]',
        body: "made by 0.1",
      },
      live: { ...base, st: "f", lu: at(30_000), dl: at(60_000) },
      stale: { ...base, st: "f", lu: at(-1_000), dl: at(60_000) },
      past: { ...base, st: "c", dl: at(-1_000), status: "200" },
    };
    for (const [slot, fields] of Object.entries(hashes)) {
      await plant(slot, fields);
      const seen = await store.claim(slot, opts);
      assert.equal(seen.state, "in_flight", slot);
      if (seen.state === "in_flight") {
        assert.equal(seen.fingerprint, null, slot);
        assert.ok(seen.retryAfterMs >= 1 && seen.retryAfterMs <= opts.leaseMs);
      }
      assert.equal(await store.release(slot, "t".repeat(40)), "lost", slot);
      assert.equal(await client.type(prefix + slot), "hash", slot);
      assert.deepEqual(
        { ...await client.hGetAll(prefix + slot) },
        fields,
        slot,
      );
    }
  },
);
