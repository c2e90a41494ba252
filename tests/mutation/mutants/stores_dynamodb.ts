// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of DynamoDbStore (issue 33): its conditions, the item read back,
 * chunked bodies, admin reads (tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import type { Mutant } from "../_targets.ts";

const STORE = "src/stores/dynamodb.ts";
const ITEM = "src/stores/_dynamodb_item.ts";
const TEST = "tests/stores/dynamodb_test.ts";
const FAULTS = "tests/stores/dynamodb_faults_test.ts";

/** The mutants of DynamoDbStore. */
export const MUTANTS: Mutant[] = [
  {
    id: "dynamodb-claim-lease-at-ttl",
    file: ITEM,
    text: "#lease_until <= :now AND #expires_at > :now)",
    replacement: "#lease_until < :now AND #expires_at > :now)",
    tests: [TEST],
    what: "a lease that ends exactly now still blocks (rule 5)",
  },
  {
    id: "dynamodb-claim-expired-strict",
    file: ITEM,
    text: "attribute_not_exists(#pk) OR #expires_at <= :now OR",
    replacement: "attribute_not_exists(#pk) OR #expires_at < :now OR",
    tests: [TEST],
    what: "a record whose TTL ends exactly now still blocks",
  },
  {
    id: "dynamodb-claim-takes-unreadable",
    file: ITEM,
    text: "(#v = :v AND #state = :inflight AND attribute_type(#token, :S)",
    replacement: "(#state = :inflight AND attribute_type(#token, :S)",
    tests: [TEST],
    what: "a claim takes over a record of a later version",
  },
  {
    id: "dynamodb-fence-ignores-state",
    file: ITEM,
    text:
      '"#token = :tk AND #v = :v AND #state = :inflight AND #expires_at > :now"',
    replacement: '"#token = :tk AND #v = :v AND #expires_at > :now"',
    tests: [TEST],
    what: "a completed record can be completed, released or extended again",
  },
  {
    id: "dynamodb-fence-past-ttl",
    file: ITEM,
    text:
      '"#token = :tk AND #v = :v AND #state = :inflight AND #expires_at > :now"',
    replacement: '"#token = :tk AND #v = :v AND #state = :inflight"',
    tests: [TEST],
    what: "an owner writes to its record after the record expired",
  },
  {
    id: "dynamodb-recovered-on-fresh",
    file: STORE,
    text: "const recovered = expires !== null && expires > now;",
    replacement: "const recovered = took !== undefined;",
    tests: [TEST],
    what: "a claim of an expired record reads as a recovered lease",
  },
  {
    id: "dynamodb-no-all-old",
    file: STORE,
    text: '          ReturnValuesOnConditionCheckFailure: "ALL_OLD",\n',
    replacement: "",
    tests: [TEST],
    what: "a replay or a conflict takes a second request (GetItem)",
  },
  {
    id: "dynamodb-fallback-trusts-stale",
    file: STORE,
    text: "if (old === undefined || rec.isFree(old, now)) return undefined;",
    replacement: "if (old === undefined) return undefined;",
    tests: [TEST],
    what:
      "on an endpoint without ALL_OLD, a record freed meanwhile is answered as what it was",
  },
  {
    id: "dynamodb-inline-off-by-one",
    file: ITEM,
    text: "fixed + body.byteLength <= INLINE_BYTES",
    replacement: "fixed + body.byteLength < INLINE_BYTES",
    tests: [TEST],
    what: "a record of exactly INLINE_BYTES goes to a chunk",
  },
  {
    id: "dynamodb-max-chunks-off-by-one",
    file: ITEM,
    text: "body.byteLength <= MAX_CHUNKS * INLINE_BYTES",
    replacement: "body.byteLength < MAX_CHUNKS * INLINE_BYTES",
    tests: [TEST],
    what: "a body of exactly MAX_CHUNKS chunks is dropped",
  },
  {
    id: "dynamodb-chunks-length-unchecked",
    file: ITEM,
    text: "return body.byteLength === fieldsOf(item).bodyBytes ? body : null;",
    replacement: "return body;",
    tests: [TEST],
    what:
      "peek reports a chunked body's length wrongly or a short body replays",
  },
  {
    id: "dynamodb-lost-keeps-chunks",
    file: STORE,
    text: "        await around?.lost();\n",
    replacement: "",
    tests: [TEST],
    what: "a lost chunked completion leaves its chunk items behind",
  },
  {
    id: "dynamodb-stats-always-exact",
    file: STORE,
    text: "exact: start === undefined,",
    replacement: "exact: true,",
    tests: [TEST],
    what: "stats stopped at its limit claims exact counts",
  },
  {
    id: "dynamodb-forget-expired-deleted",
    file: STORE,
    text: 'return expires !== null && expires <= now ? "absent" : "deleted";',
    replacement: 'return "deleted";',
    tests: [TEST],
    what: "forget of an expired record says it deleted one",
  },
  {
    id: "dynamodb-throttle-undone",
    file: STORE,
    text: 'if ($fault === "client") return false;',
    replacement: "",
    tests: [FAULTS],
    what: "a refused claim (throttled) is undone as if it may have landed",
  },
];
