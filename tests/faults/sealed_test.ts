// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The whole fault suite again, every app with sealed records
 * (`IDEMPOTENCY_FAULTS_SEALED=1`, which `SEALING` in `_load.ts` reads): store
 * faults, hostile input, killed and paused servers and processes must keep
 * every guarantee when the records are sealed too.
 *
 * @module
 */

import assert from "node:assert/strict";

const SEALED = Deno.env.get("IDEMPOTENCY_FAULTS_SEALED") === "1";

Deno.test({
  name: "faults: the whole fault suite passes with sealed records",
  // The run below sets the variable: it must not start itself again.
  ignore: SEALED,
  async fn() {
    const dir = new URL(".", import.meta.url).pathname;
    const files = [...Deno.readDirSync(dir)]
      .map((entry) => entry.name)
      .filter((name) => name.endsWith("_test.ts") && name !== "sealed_test.ts")
      .sort()
      .map((name) => dir + name);
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "test",
        "--allow-net",
        "--allow-env",
        "--allow-read",
        "--allow-write",
        "--allow-run",
        "--unstable-kv",
        ...files,
      ],
      env: { IDEMPOTENCY_FAULTS_SEALED: "1", NO_COLOR: "1" },
    }).output();
    const out = new TextDecoder().decode(stdout);
    assert.equal(
      code,
      0,
      `the sealed fault suite failed:\n${out}\n${
        new TextDecoder().decode(stderr)
      }`,
    );
    // Every file ran, and none was skipped for want of a service.
    assert.match(out, /\| 0 failed/);
    assert.doesNotMatch(out, /ignored/, out);
  },
});
