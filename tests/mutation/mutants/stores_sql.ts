// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Mutants of the SQL stores: MySQL, PostgreSQL and SQLite (tests/mutation/mutants.ts runs them all).
 *
 * @module
 */

import {
  type Mutant,
  MYSQL_SQL,
  POSTGRES_SQL,
  SQLITE_SQL,
  SQLITE_TX,
  T,
} from "../_targets.ts";

/** The mutants of the SQL stores: MySQL, PostgreSQL and SQLite. */
export const MUTANTS: Mutant[] = [
  // --- issue 32, MysqlStore: the claim procedure, strictness, its transactions ---
  {
    id: "mysql-claim-takes-any-row",
    file: MYSQL_SQL,
    text: 'token = IF(${free("v_now")}, p_token, token),',
    replacement: "token = p_token,",
    tests: [T.mysql],
    what: "a claim takes over a live or completed slot",
  },
  {
    id: "mysql-fresh-insert-recovered",
    file: "src/stores/mysql.ts",
    text: "if (won) return { token, takeovers: 0 };",
    replacement: "if (won) return { token, takeovers: 1 };",
    tests: [T.mysql],
    what: "a fresh claim by INSERT reads as recovered",
  },
  {
    id: "mysql-read-never-frees",
    file: "src/stores/mysql.ts",
    text: "if (seen !== undefined && !truth(seen.free)) return seen;",
    replacement: "if (seen !== undefined) return seen;",
    tests: [T.mysql],
    what: "a claim never takes over an expired record or lease",
  },
  {
    id: "mysql-peek-without-response",
    file: MYSQL_SQL,
    text: "CASE WHEN ? = 1 THEN body END AS body,",
    replacement: "CASE WHEN ? = 2 THEN body END AS body,",
    tests: ["tests/cli/cli_sealed_test.ts"],
    what:
      "peek({ response: true }) gives no body: a sealed record cannot be opened",
  },
  {
    id: "mysql-slot-collated",
    file: MYSQL_SQL,
    text: "slot VARBINARY(256) NOT NULL PRIMARY KEY,",
    replacement:
      "slot VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,",
    tests: ["tests/stores/mysql_property_test.ts"],
    what: "slots that differ in case or trailing spaces share one record",
  },
  {
    id: "mysql-takeovers-not-counted",
    file: MYSQL_SQL,
    text: '"IF(expires_at <= v_now, 0, takeovers + 1)"',
    replacement: '"0"',
    tests: [T.mysql],
    what: "a lease taken over reads as a fresh claim (recovered: false)",
  },
  {
    id: "mysql-replay-locks",
    file: MYSQL_SQL,
    text: 'read: read(t, "?"),',
    replacement: 'read: `${read(t, "?")} FOR UPDATE`,',
    tests: [T.mysqlTable],
    what: "the claim's read locks: a replay waits for a row lock",
  },
  {
    id: "mysql-migrate-not-strict",
    file: "src/stores/mysql.ts",
    text: "await conn.query(`SET SESSION sql_mode = '${STRICT_MODE}'`);",
    replacement: "await conn.query(\"SET SESSION sql_mode = ''\");",
    tests: [T.mysqlTable],
    what: "the claim procedure runs under a lax sql_mode and truncates",
  },
  {
    id: "mysql-transactional-other-store",
    file: "src/stores/mysql.ts",
    text: "if (isClaimed(request)) throw new TypeError(CLAIMED_ELSEWHERE);",
    replacement: "",
    tests: [T.mysqlTransaction],
    what:
      "a request another store claimed commits its rows apart from its record",
  },
  {
    id: "mysql-lost-unit-commits",
    file: "src/stores/_mysql_transaction.ts",
    text: "if (written !== 1) {",
    replacement: "if (written > 1) {",
    tests: [T.mysqlTransaction],
    what: "a transaction whose claim was lost commits the handler's rows",
  },
  {
    id: "mysql-plain-transaction-commits-a-throw",
    file: "src/stores/_mysql_transaction.ts",
    text:
      'await end(conn, "ROLLBACK").catch(() => {});\n    throw error;\n  }\n  await end',
    replacement:
      'await end(conn, "COMMIT").catch(() => {});\n    throw error;\n  }\n  await end',
    tests: [T.mysqlTransaction],
    what: "a keyless request's handler that throws commits its rows",
  },
  {
    id: "postgres-fence-state",
    file: POSTGRES_SQL,
    text: "AND state = 'in_flight' AND expires_at > ${NOW}`;",
    replacement: "AND expires_at > ${NOW}`;",
    tests: [...T.postgres],
    what: "PostgresStore lets a completed row be completed or released again",
  },
  {
    id: "rule4-postgres-fence-any-token",
    file: POSTGRES_SQL,
    text: "slot = $1 AND token = $2 AND version",
    replacement: "slot = $1 AND (token = $2 OR token IS NOT NULL) AND version",
    tests: [...T.postgres],
    what: "rule 4: PostgresStore applies a write from any token",
  },
  {
    id: "postgres-epipe-is-sqlstate",
    file: POSTGRES_SQL,
    text:
      `if (typeof severity === "string" && typeof code === "string") {\n    return severity !== "ERROR";`,
    replacement:
      `if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) {\n    return typeof severity === "string" && severity !== "ERROR";`,
    tests: [...T.postgres],
    what: "a claim cut off by EPIPE is taken as refused and never undone",
  },
  {
    id: "postgres-stats-seal-inverted",
    file: POSTGRES_SQL,
    text: "AND headers->0->>0 = '${SEALED_HEADER}'",
    replacement: "AND headers->0->>0 <> '${SEALED_HEADER}'",
    tests: ["tests/inspect_sealed_test.ts", "tests/cli/cli_sealed_test.ts"],
    what:
      "PostgresStore.stats() counts records in clear as sealed: with the keys, they count as completed though the app answers 409",
  },
  {
    id: "postgres-peek-no-body",
    file: POSTGRES_SQL,
    text: "CASE WHEN $2::int = 1 THEN body END AS body",
    replacement: "NULL::bytea AS body",
    tests: ["tests/inspect_sealed_test.ts"],
    what:
      "PostgresStore.peek({ response: true }) gives no body: inspect cannot open a sealed record it holds",
  },
  // --- issue 25, src/stores/postgres.ts: claim attempts, sweep batches, outcomes ---
  {
    id: "postgres-claim-attempts-fewer",
    file: "src/stores/postgres.ts",
    text: "const CLAIM_ATTEMPTS = 4;",
    replacement: "const CLAIM_ATTEMPTS = 3;",
    tests: [...T.postgres],
    what: "a claim that finds no row gives up after 3 statements",
  },
  {
    id: "postgres-claim-attempts-more",
    file: "src/stores/postgres.ts",
    text: "const CLAIM_ATTEMPTS = 4;",
    replacement: "const CLAIM_ATTEMPTS = 5;",
    tests: [...T.postgres],
    what: "a claim that finds no row runs 5 statements",
  },
  {
    id: "postgres-free-row-decoded",
    file: "src/stores/postgres.ts",
    text: "if (row === undefined || row.free === true) continue;",
    replacement: "if (row === undefined) continue;",
    tests: [...T.postgres],
    what:
      "a free row read while another claim won is answered as is, not claimed again",
  },
  {
    id: "postgres-sweep-full-batch-last",
    file: "src/stores/postgres.ts",
    text: "if (count < batchSize) return total;",
    replacement: "if (count <= batchSize) return total;",
    tests: [...T.postgres],
    what: "sweep stops after a full batch, leaving expired rows",
  },
  {
    id: "postgres-sweep-default-batch",
    file: "src/stores/postgres.ts",
    text: "options.batchSize ?? 1000",
    replacement: "options.batchSize ?? 999",
    tests: [...T.postgres],
    what: "sweep's default batch is 999 rows",
  },
  {
    id: "postgres-write-outcomes-swapped",
    file: "src/stores/postgres.ts",
    text: 'return rows.count === 1 ? "applied" : "lost";',
    replacement: 'return rows.count === 1 ? "lost" : "applied";',
    tests: [...T.postgres],
    what:
      "a fenced write that changed its row is reported lost, one that changed none applied",
  },
  {
    id: "postgres-default-timeout",
    file: "src/stores/_postgres_options.ts",
    text: "const timeoutMs = timeoutOption(options.timeoutMs, 2000);",
    replacement: "const timeoutMs = timeoutOption(options.timeoutMs, 2001);",
    tests: [...T.postgres],
    what: "a PostgreSQL statement gets 2,001 ms by default, not 2,000",
  },
  {
    id: "postgres-table-bytes-boundary",
    file: "src/stores/_postgres_migration.ts",
    text: "if (bytes(table) > MAX_TABLE_BYTES) {",
    replacement: "if (bytes(table) >= MAX_TABLE_BYTES) {",
    tests: [...T.postgres],
    what: "a table name of exactly 48 bytes is refused",
  },
  {
    id: "postgres-table-chars",
    file: "src/stores/_postgres_migration.ts",
    text: "if (bytes(table) > MAX_TABLE_BYTES) {",
    replacement: "if (table.length > MAX_TABLE_BYTES) {",
    tests: [...T.postgres],
    what:
      "a table name is measured in characters: 49 bytes in 25 characters pass",
  },
  {
    id: "postgres-schema-bytes-boundary",
    file: "src/stores/_postgres_migration.ts",
    text: "schema !== null && bytes(schema) > MAX_SCHEMA_BYTES",
    replacement: "schema !== null && bytes(schema) >= MAX_SCHEMA_BYTES",
    tests: [...T.postgres],
    what: "a schema name of exactly 63 bytes is refused",
  },
  {
    id: "postgres-schema-unbounded",
    file: "src/stores/_postgres_migration.ts",
    text: "const MAX_SCHEMA_BYTES = 63;",
    replacement: "const MAX_SCHEMA_BYTES = 64;",
    tests: [...T.postgres],
    what: "a schema name of 64 bytes is taken (PostgreSQL would cut it)",
  },
  {
    id: "postgres-peek-expired",
    file: "src/stores/_postgres_sql.ts",
    text: "FROM ${t} WHERE slot = $1 AND ${live}`,",
    replacement: "FROM ${t} WHERE slot = $1`,",
    tests: ["tests/stores/postgres_test.ts"],
    what: "PostgresStore.peek() reads an expired row as held",
  },
  {
    id: "postgres-stats-unreadable",
    file: "src/stores/_postgres_sql.ts",
    text: "count(*)::int AS total",
    replacement: "count(*) FILTER (WHERE state = 'in_flight')::int AS total",
    tests: ["tests/stores/postgres_test.ts"],
    what: "PostgresStore.stats() miscounts unreadable rows",
  },
  {
    id: "postgres-hint-migrate",
    file: "src/stores/postgres.ts",
    text: '?.code === "42P01"',
    replacement: '?.code === "42P02"',
    tests: ["tests/misconfiguration_test.ts"],
    what: "a table never migrated fails with no word of migrate()",
  },
  {
    id: "postgres-transactional-pool",
    file: "src/stores/postgres.ts",
    text: "    assertPool(this.#sql);\n",
    replacement: "",
    tests: [
      "tests/misconfiguration_test.ts",
      "tests/stores/postgres_transaction_test.ts",
    ],
    what:
      "transactional() on a pool of one is accepted and fails each request with a 500",
  },
  // --- issue 29, item 9: transactional handlers on requests no store claimed
  {
    id: "postgres-transactional-keyless-refused",
    file: "src/stores/postgres.ts",
    text: "if (!this.#units.has(request) && !isClaimed(request)) {",
    replacement: "if (false) {",
    tests: [T.keyless],
    what:
      "a transactional handler answers a keyless request with 'No transaction for this request'",
  },
  {
    id: "postgres-keyless-commits-on-throw",
    file: "src/stores/_postgres_transaction.ts",
    text: "    response = await run(tx);\n",
    replacement:
      "    response = await Promise.resolve(run(tx)).catch(() => new Response(null, { status: 500 }));\n",
    tests: [T.keyless],
    what: "a keyless handler that throws keeps its rows",
  },
  // --- SqliteStore -------------------------------------------------------------
  {
    id: "sqlite-judged-lease-boundary",
    file: SQLITE_SQL,
    text: "ms(lease) && lease <= now;",
    replacement: "ms(lease) && lease < now;",
    tests: [...T.sqlite],
    what:
      "SqliteStore's read calls a lease that ends now held, unlike its upsert",
  },
  {
    id: "sqlite-judged-text-deadline",
    file: SQLITE_SQL,
    text: "AND typeof(r.expires_at) IN ('integer', 'real') AND",
    replacement: "AND",
    tests: [...T.sqlite],
    what:
      "SqliteStore takes over a row whose deadline is text (SQLite orders text after numbers)",
  },
  {
    id: "sqlite-fence-state",
    file: SQLITE_SQL,
    text: "AND state = 'in_flight' AND expires_at > ${NOW}`;",
    replacement: "AND expires_at > ${NOW}`;",
    tests: [...T.sqlite],
    what: "SqliteStore lets a completed row be completed or released again",
  },
  {
    id: "sqlite-commit-lost-commits",
    file: SQLITE_TX,
    text: "end(this.setup, db, applied);",
    replacement: "end(this.setup, db, true);",
    tests: [...T.sqlite],
    what:
      "a transaction whose claim was lost commits the handler's rows anyway",
  },
  {
    id: "sqlite-turn-ignored",
    file: "src/stores/sqlite.ts",
    text: "if (this.#turn.free) return this.#now(operation, work);",
    replacement: "return this.#now(operation, work);",
    tests: [...T.sqlite],
    what:
      "a write runs on the lock this process's open transaction holds, stopping the event loop",
  },
  {
    id: "sqlite-transactional-claimed-plain",
    file: "src/stores/sqlite.ts",
    text: "if (!this.#units.has(request) && !isClaimed(request)) {",
    replacement: "if (!this.#units.has(request)) {",
    tests: [...T.sqlite],
    what:
      "a request a FailoverStore claimed gets a plain SQLite transaction that commits apart from its record",
  },
];
