// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What every list of mutants shares: the {@linkcode Mutant} shape, the files
 * mutated most often and the test files ({@linkcode T}) that must catch them.
 *
 * @module
 */

/** One small bug and the tests that must catch it. */
export interface Mutant {
  /** A short unique name. */
  id: string;
  /** The file to mutate, from the repository root. */
  file: string;
  /** The exact text to replace: it must occur exactly once in `file`. */
  text: string;
  /** What replaces it. */
  replacement: string;
  /** The test files, from the repository root, that must fail. */
  tests: string[];
  /** What the bug breaks, in one line. */
  what: string;
}

export const KV_ENGINE = "src/stores/_kv_engine.ts";
export const MEMORY = "src/stores/memory.ts";
export const REDIS_SCRIPTS = "src/stores/_redis_scripts.ts";
export const REDIS_RECORD = "src/stores/_redis_record.ts";
export const STORE_CALL = "src/stores/_store_call.ts";
export const POSTGRES_SQL = "src/stores/_postgres_sql.ts";
export const MYSQL_SQL = "src/stores/_mysql_sql.ts";
export const SQLITE_SQL = "src/stores/_sqlite_sql.ts";
export const SQLITE_TX = "src/stores/_sqlite_transaction.ts";
export const KV_RECORD = "src/stores/_kv_record.ts";
export const FAILOVER = "src/stores/failover.ts";
export const OPTIONS = "src/options.ts";
export const CONFIGURE = "src/_configure.ts";
export const GUARD = "src/_guard.ts";
export const RESPONSE = "src/_response.ts";
export const REQUEST = "src/_request.ts";

/** The test files that catch mutants, by what they test. */
export const T = {
  guardCapture: "tests/idempotency_capture_test.ts",
  protocol: [
    "tests/idempotency_protocol_test.ts",
    "tests/idempotency_answers_test.ts",
    "tests/idempotency_body_limit_test.ts",
  ],
  guardLease: "tests/heartbeat_middleware_test.ts",
  property: "tests/idempotency_property_test.ts",
  edges: "tests/response_test.ts",
  lease: "tests/heartbeat_test.ts",
  memory: ["tests/stores/memory_test.ts", "tests/stores/memory_model_test.ts"],
  kv: ["tests/stores/kv_test.ts", "tests/stores/kv_limits_test.ts"],
  redis: [
    "tests/stores/redis_test.ts",
    "tests/stores/redis_failures_test.ts",
    "tests/stores/redis_lease_test.ts",
    "tests/stores/redis_undo_test.ts",
  ],
  mysql: "tests/stores/mysql_test.ts",
  mysqlTable: "tests/stores/mysql_table_test.ts",
  mysqlTransaction: "tests/stores/mysql_transaction_test.ts",
  postgres: [
    "tests/stores/postgres_test.ts",
    "tests/stores/postgres_faults_test.ts",
    "tests/stores/postgres_scripted_test.ts",
    "tests/stores/postgres_table_test.ts",
  ],
  sqlite: [
    "tests/stores/transactional_keyless_test.ts",
    "tests/stores/sqlite_test.ts",
    "tests/stores/sqlite_rows_test.ts",
    "tests/stores/sqlite_transaction_test.ts",
  ],
  failover: [
    "tests/stores/failover_test.ts",
    "tests/stores/failover_fallback_test.ts",
    "tests/stores/failover_outage_test.ts",
  ],
  capture: "tests/capture_test.ts",
  key: "tests/key_test.ts",
  e2e: "tests/stores/e2e_test.ts",
  completion: ["tests/completion_test.ts", "tests/completion_stores_test.ts"],
  memoryBound: "tests/stores/memory_bound_test.ts",
  hostile: "tests/idempotency_hostile_input_test.ts",
  recordHeaders: "tests/record_test.ts",
  waitReplicas: "tests/stores/redis_wait_replicas_test.ts",
  client: [
    "tests/client/client_test.ts",
    "tests/client/client_bodies_test.ts",
    "tests/client/client_options_test.ts",
    "tests/client/client_retry_test.ts",
  ],
  time: "tests/stores/store_call_test.ts",
  settle: "tests/heartbeat_settle_test.ts",
  options: "tests/idempotency_options_test.ts",
  credentials: "tests/idempotency_credentials_test.ts",
  unstored: "tests/idempotency_unstored_headers_test.ts",
  sealing: [
    "tests/idempotency_sealing_test.ts",
    "tests/idempotency_sealing_edges_test.ts",
  ],
  logging: "tests/logging_test.ts",
  unreadable: "tests/idempotency_unreadable_test.ts",
  keyless: "tests/stores/transactional_keyless_test.ts",
  clientDefaults: "tests/client/client_defaults_test.ts",
};
