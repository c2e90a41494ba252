// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `openApiComponents()`: merged into an API's document, the result is valid
 * OpenAPI 3.1 by a validator nobody here wrote (`@readme/openapi-parser`,
 * pinned in deno.json), whatever the options; its examples are the bodies
 * the middleware really sends; each status has its own codes and headers.
 *
 * @module
 */

import assert from "node:assert/strict";
import { validate } from "@readme/openapi-parser";
import { idempotency, MemoryStore, PROBLEM_TYPES } from "../mod.ts";
import {
  type OpenApiComponents,
  openApiComponents,
  type OpenApiOptions,
} from "../src/openapi/openapi.ts";
import { post } from "./_support/http.ts";
import { deferred } from "./_support/time.ts";

type Json = Record<string, unknown>;
const ref = (kind: string, name: string) => ({
  $ref: `#/components/${kind}/${name}`,
});

/** A payments API's own document with the components merged in, as a user writes it. */
function merged(components: OpenApiComponents, statuses: number[]): Json {
  const responses: Json = {
    "201": {
      description: "The payment, or its replay",
      headers: {
        "Idempotent-Replayed": ref("headers", "IdempotentReplayed"),
        "Idempotent-Body-Omitted": ref("headers", "IdempotentBodyOmitted"),
        "Idempotent-Omitted-Headers": ref(
          "headers",
          "IdempotentOmittedHeaders",
        ),
        ...("IdempotencyLifetime" in components.headers
          ? { "Idempotency-Lifetime": ref("headers", "IdempotencyLifetime") }
          : {}),
      },
      content: {
        "application/json": { schema: ref("schemas", "Payment") },
      },
    },
  };
  for (const status of statuses) {
    responses[`${status}`] = ref("responses", `Idempotency${status}`);
  }
  return {
    openapi: "3.1.0",
    info: { title: "Payments (codes)", version: "1.0.0" },
    paths: {
      "/payments": {
        post: {
          operationId: "createPayment",
          parameters: [ref("parameters", "IdempotencyKey")],
          requestBody: {
            content: {
              "application/json": { schema: ref("schemas", "Payment") },
            },
          },
          responses,
        },
      },
    },
    components: {
      ...components,
      schemas: {
        ...components.schemas,
        Payment: {
          type: "object",
          properties: { amount: { type: "integer" } },
        },
      },
    },
  };
}

const ALL = [400, 409, 413, 422, 500, 503];

async function validated(document: Json) {
  return await validate(structuredClone(document) as never);
}

Deno.test("openApiComponents() merged into an API's document is valid OpenAPI 3.1, for each option", async () => {
  const variants: OpenApiOptions[] = [
    {},
    { required: true },
    { header: "X-Request-Key", replayHeader: "X-Replayed", required: false },
    { lifetimeHeader: "Idempotency-Lifetime", maxRequestBytes: 1 },
  ];
  for (const options of variants) {
    const { components } = await openApiComponents(options);
    const result = await validated(merged(components, ALL));
    assert.deepEqual(
      result.valid ? [] : result.errors,
      [],
      JSON.stringify(options),
    );
    assert.equal(result.valid, true);
    assert.deepEqual(result.warnings, []);
    assert.equal(result.specification, "OpenAPI");
  }
});

Deno.test("openApiComponents(): the validator refuses a document that breaks them (it is not a no-op)", async () => {
  const { components } = await openApiComponents({});
  const dangling = merged(components, [...ALL, 418]); // no Idempotency418
  assert.equal((await validated(dangling)).valid, false);
  const noIn = structuredClone(components);
  delete (noIn.parameters.IdempotencyKey as Json).in;
  assert.equal((await validated(merged(noIn, ALL))).valid, false);
});

Deno.test("openApiComponents(): one response a status, each with its codes, Retry-After on the 409 and 503 only", async () => {
  for (const required of [false, true]) {
    const { components } = await openApiComponents({ required });
    assert.deepEqual(
      Object.keys(components.responses),
      ALL.map((s) => `Idempotency${s}`),
    );
    const codes = (status: number) => {
      const response = components.responses[`Idempotency${status}`] as {
        headers: Json;
        content: { "application/problem+json": { examples: Json } };
      };
      const retryAfter = "Retry-After" in response.headers;
      assert.equal(retryAfter, status === 409 || status === 503, `${status}`);
      assert.ok("Cache-Control" in response.headers);
      return Object.keys(response.content["application/problem+json"].examples);
    };
    assert.deepEqual(codes(400), [
      ...(required ? ["idempotency_key_missing"] : []),
      "idempotency_key_invalid",
      "idempotency_request_incomplete",
    ]);
    assert.deepEqual(codes(409), ["idempotency_in_flight"]);
    assert.deepEqual(codes(413), ["idempotency_request_too_large"]);
    assert.deepEqual(codes(422), ["idempotency_conflict"]);
    assert.deepEqual(codes(500), [
      "idempotency_record_unreadable",
      "idempotency_misconfigured",
    ]);
    assert.deepEqual(codes(503), ["idempotency_unavailable"]);
    const schema = components.schemas.IdempotencyProblem as {
      properties: { code: { enum: string[] } };
      required: string[];
    };
    assert.equal(
      schema.properties.code.enum.length,
      Object.keys(PROBLEM_TYPES).length,
      "every code, always",
    );
    assert.ok(schema.required.includes("code"));
    assert.ok(schema.required.includes("retryable"));
    const key = components.parameters.IdempotencyKey as Json;
    assert.deepEqual(
      [key.name, key.in, key.required],
      ["Idempotency-Key", "header", required],
    );
  }
});

Deno.test("openApiComponents(): the examples are the bodies the middleware sends", async () => {
  const { components } = await openApiComponents({ required: true });
  const example = (status: number, code: string) =>
    ((components.responses[`Idempotency${status}`] as {
      content: { "application/problem+json": { examples: Json } };
    }).content["application/problem+json"].examples[code] as { value: Json })
      .value;
  const gate = deferred();
  const started = deferred();
  const handler = idempotency(async () => {
    started.resolve();
    await gate.promise;
    return new Response("ok", { status: 201 });
  }, { scope: "global", required: true, store: new MemoryStore() });
  const missing = await handler(post(null));
  assert.deepEqual(
    await missing.json(),
    example(400, "idempotency_key_missing"),
  );
  const malformed = await handler(post(""));
  assert.deepEqual(
    await malformed.json(),
    example(400, "idempotency_key_invalid"),
  );
  const first = handler(post("k1"));
  await started.promise;
  const busy = await handler(post("k1"));
  assert.deepEqual(await busy.json(), example(409, "idempotency_in_flight"));
  gate.resolve();
  assert.equal((await first).status, 201);
  const reused = await handler(post("k1", '{"other":1}'));
  const body = await reused.json();
  assert.deepEqual(body, example(422, "idempotency_conflict"));
  assert.equal(body.type, PROBLEM_TYPES.reused);
});

Deno.test("openApiComponents(): names from the options, the lifetime header only when named, bad options refused", async () => {
  const { components } = await openApiComponents({
    header: "X-Request-Key",
    replayHeader: "X-Replayed",
  });
  assert.equal(
    (components.parameters.IdempotencyKey as Json).name,
    "X-Request-Key",
  );
  assert.match(
    (components.headers.IdempotentReplayed as Json).description as string,
    /X-Replayed/,
  );
  assert.ok(!("IdempotencyLifetime" in components.headers));
  const named = await openApiComponents({ lifetimeHeader: "Key-Lifetime" });
  assert.match(
    (named.components.headers.IdempotencyLifetime as Json)
      .description as string,
    /Provisional.*Key-Lifetime/,
  );
  await assert.rejects(openApiComponents({ header: "bad header" }), TypeError);
  await assert.rejects(
    openApiComponents({ required: "yes" as unknown as boolean }),
    {
      name: "TypeError",
      message: "'required' must be a boolean: current value is yes",
    },
  );
  await assert.rejects(openApiComponents({ maxRequestBytes: 0 }), RangeError);
  const one = await openApiComponents({ maxRequestBytes: 1 });
  assert.match(
    JSON.stringify(one.components.responses.Idempotency413),
    /at most 1 bytes/,
  );
});
