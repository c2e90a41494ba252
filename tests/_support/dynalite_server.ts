// Copyright 2026 the @idempotent/http authors. MIT license.
// deno-lint-ignore-file no-console
/**
 * A dynalite (DynamoDB's API on an in-memory LevelDB) of a test's own, run as
 * its own process by `dynalite.ts` so that a test can pause (SIGSTOP), kill
 * and restart it: `deno run dynalite_server.ts PORT [--plain]`.
 *
 * Where dynalite 4.0.0 lacks what DynamoDB has, this process adds it, each
 * as DynamoDB documents it, unless `--plain` (dynalite as published):
 *
 * - `ReturnValuesOnConditionCheckFailure: ALL_OLD`: dynalite reads the old
 *   item to check the condition and drops it; here a failed condition's
 *   error carries it as `Item`, in the same request (DynamoDB, since 2023).
 * - `UpdateTimeToLive` / `DescribeTimeToLive`: dynalite answers the first
 *   `UnknownOperationException` and the second `DISABLED` always; here the
 *   setting is kept (nothing is ever deleted by TTL, as DynamoDB deletes
 *   late anyway: the store never relies on it).
 * - throttling: dynalite never throttles; `POST /__throttle?n=N` makes the
 *   next N requests answer `ThrottlingException` (400), as DynamoDB does.
 *
 * @module
 */

import { createRequire } from "node:module";

// One module cache for dynalite and its `db`, so that the patch reaches it.
const require = createRequire(import.meta.resolve("dynalite"));
const dynalite = require("./index.js");
const db = require("./db/index.js");

const port = Number(Deno.args[0]);
const plain = Deno.args.includes("--plain");
const server = dynalite({
  createTableMs: 0,
  deleteTableMs: 0,
  updateTableMs: 0,
});

if (!plain) {
  // Its validation drops the parameters it does not know: teach it this one.
  for (const action of ["putItem", "updateItem", "deleteItem"]) {
    require(`./validations/${action}.js`).types
      .ReturnValuesOnConditionCheckFailure = {
        type: "String",
        enum: ["ALL_OLD", "NONE"],
      };
  }
  const check = db.checkConditional;
  db.checkConditional = (data: Record<string, unknown>, existing: unknown) => {
    const error = check(data, existing);
    if (
      error && existing &&
      data.ReturnValuesOnConditionCheckFailure === "ALL_OLD"
    ) error.body.Item = existing;
    return error;
  };
  const [dynamo] = server.listeners("request") as ((
    req: unknown,
    res: unknown,
  ) => void)[];
  server.removeAllListeners("request");
  const ttl = new Map<string, string>();
  let throttled = 0;
  // deno-lint-ignore no-explicit-any
  server.on("request", (req: any, res: any) => {
    const answer = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/x-amz-json-1.0" });
      res.end(JSON.stringify(body));
    };
    if (req.url.startsWith("/__throttle")) {
      throttled = Number(new URL(req.url, "http://x").searchParams.get("n"));
      return answer(200, {});
    }
    const target = String(req.headers["x-amz-target"] ?? "");
    if (throttled > 0 && target.startsWith("DynamoDB_")) {
      throttled--;
      req.resume();
      return answer(400, {
        __type: "com.amazonaws.dynamodb.v20120810#ThrottlingException",
        message: "Rate of requests exceeds the allowed throughput.",
      });
    }
    const op = target.split(".")[1];
    if (op !== "UpdateTimeToLive" && op !== "DescribeTimeToLive") {
      return dynamo!(req, res);
    }
    let text = "";
    req.on(
      "data",
      (chunk: Uint8Array) => text += new TextDecoder().decode(chunk),
    );
    req.on("end", () => {
      const body = JSON.parse(text);
      if (op === "UpdateTimeToLive") {
        const spec = body.TimeToLiveSpecification;
        if (spec.Enabled) ttl.set(body.TableName, spec.AttributeName);
        else ttl.delete(body.TableName);
        return answer(200, { TimeToLiveSpecification: spec });
      }
      const name = ttl.get(body.TableName);
      answer(200, {
        TimeToLiveDescription: name === undefined
          ? { TimeToLiveStatus: "DISABLED" }
          : { TimeToLiveStatus: "ENABLED", AttributeName: name },
      });
    });
  });
}

server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`));
