// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * `openApiComponents(options)`: what the middleware adds to an API, as
 * OpenAPI 3.1 components to merge into the API's own document: the key's
 * header parameter, the replay headers, and a response for each problem
 * status, with the problem+json schema, its codes, and the bodies the
 * middleware sends as examples.
 *
 * @example Merged into an API's document
 * ```ts
 * import { openApiComponents } from "@idempotent/http/openapi";
 * import assert from "node:assert/strict";
 *
 * const { components } = await openApiComponents({ required: true });
 * const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });
 * const document = {
 *   openapi: "3.1.0",
 *   info: { title: "Payments", version: "1" },
 *   paths: {
 *     "/payments": { post: { parameters: [ref("parameters", "IdempotencyKey")], responses: {
 *       "201": { description: "Paid", headers: { "Idempotent-Replayed": ref("headers", "IdempotentReplayed") } },
 *       "409": ref("responses", "Idempotency409"),
 *       "422": ref("responses", "Idempotency422"),
 *     } } },
 *   },
 *   components: { ...components, schemas: { ...components.schemas, Payment: { type: "object" } } },
 * };
 * const key = document.components.parameters.IdempotencyKey as { name: string; required: boolean };
 * assert.deepEqual([key.name, key.required], ["Idempotency-Key", true]);
 * ```
 *
 * @module
 */

import { BODY_OMITTED_HEADER, HEADERS_OMITTED_HEADER } from "../idempotency.ts";
import { DEFAULTS } from "../options.ts";
import {
  PROBLEM_TYPES,
  problemResponse,
  type ProblemTypes,
} from "../problem.ts";
import { MAX_KEY_LENGTH, parseIdempotencyKey } from "../key.ts";
import { headerName, optionalBoolean, positiveInteger } from "../_validate.ts";

/** The options of {@linkcode openApiComponents}: the middleware's own, where they change what it sends. */
export interface OpenApiOptions {
  /** The middleware's `header` option. @default {"Idempotency-Key"} */
  header?: string;
  /** The middleware's `replayHeader` option. @default {"Idempotent-Replayed"} */
  replayHeader?: string;
  /** The middleware's `required` option: the parameter is required, and a 400 says so. @default {false} */
  required?: boolean;
  /** The middleware's `maxRequestBytes` option, named in the 413. @default {1_048_576} */
  maxRequestBytes?: number;
  /**
   * Provisional: the name of the response header that advertises a key's
   * lifetime, described as `IdempotencyLifetime` when given (issue 31).
   * @default {undefined} (not described)
   */
  lifetimeHeader?: string;
}

/** A JSON value of the document: what OpenAPI's objects are made of. */
export type OpenApiValue =
  | string
  | number
  | boolean
  | null
  | OpenApiValue[]
  | { [name: string]: OpenApiValue };

/** The `components` of an OpenAPI 3.1 document, by kind. */
export interface OpenApiComponents {
  /** `IdempotencyKey`: the request header. */
  parameters: Record<string, OpenApiValue>;
  /** `IdempotentReplayed`, `IdempotentBodyOmitted`, `IdempotentOmittedHeaders`, `RetryAfter` (and `IdempotencyLifetime`). */
  headers: Record<string, OpenApiValue>;
  /** `IdempotencyProblem`: the RFC 9457 body with its `code` and `retryable`. */
  schemas: Record<string, OpenApiValue>;
  /** `Idempotency400`, `Idempotency409`, `Idempotency413`, `Idempotency422`, `Idempotency500`, `Idempotency503`. */
  responses: Record<string, OpenApiValue>;
}

/** Each problem case, in the order of its examples. */
const CASES = Object.keys(PROBLEM_TYPES) as (keyof ProblemTypes)[];

const STATUS_TEXT: Record<number, string> = {
  400: "The key is missing or malformed, or the body broke off: nothing ran",
  409: "A request with this key is in flight: retry after `Retry-After`",
  413: "The body is larger than the middleware buffers: nothing ran",
  422: "The key was used for another request: use a new key",
  500: "The key's record cannot be read: nothing ran; an operator must act",
  503: "The store is unreachable: nothing ran; retry after `Retry-After`",
};

/**
 * The OpenAPI 3.1 components that describe the middleware: merge them into
 * the API's `components`, and reference them from each guarded operation
 * (`#/components/parameters/IdempotencyKey`, the
 * `#/components/responses/Idempotency<status>` a route can answer, and the
 * replay headers on its own responses). The examples are the bodies the
 * middleware sends; with `renderProblem` (or a preset) the bodies are the
 * renderer's, which these do not describe.
 *
 * @param options The middleware's options that change what it sends.
 * @returns `{ components }`, an OpenAPI 3.1 fragment (a promise: the
 *   examples are read from the middleware's own responses).
 * @throws {TypeError} When a header name is not a valid header name, or
 *   `required` not a boolean.
 * @throws {RangeError} When `maxRequestBytes` is not a positive integer.
 *
 * @example The 409 has a `Retry-After`
 * ```ts
 * import { openApiComponents } from "@idempotent/http/openapi";
 * import assert from "node:assert/strict";
 *
 * const { components: { responses } } = await openApiComponents();
 * assert.match(JSON.stringify(responses.Idempotency409), /Retry-After/);
 * ```
 */
export async function openApiComponents(
  options: OpenApiOptions = {},
): Promise<{ components: OpenApiComponents }> {
  const header = options.header ?? DEFAULTS.header;
  const replay = options.replayHeader ?? DEFAULTS.replayHeader;
  headerName("header", header);
  headerName("replayHeader", replay);
  const required = optionalBoolean("required", options.required);
  const maxRequestBytes = positiveInteger(
    "maxRequestBytes",
    options.maxRequestBytes ?? DEFAULTS.maxRequestBytes,
  );
  const bodies = await Promise.all(
    // The middleware names the header lower-cased in its details.
    CASES.map((kind) => example(kind, header.toLowerCase(), maxRequestBytes)),
  );
  const ref = (kind: string, name: string) => ({
    $ref: `#/components/${kind}/${name}`,
  });
  const problemHeaders = (retryAfter: boolean) => ({
    "Cache-Control": {
      description: "`no-store`: a problem is never cached.",
      schema: { type: "string" },
    },
    ...(retryAfter ? { "Retry-After": ref("headers", "RetryAfter") } : {}),
  });
  const responses: Record<string, Record<string, OpenApiValue>> = {};
  for (const [status, description] of Object.entries(STATUS_TEXT)) {
    const examples: Record<string, OpenApiValue> = {};
    responses[`Idempotency${status}`] = {
      description,
      headers: problemHeaders(status === "409" || status === "503"),
      content: {
        "application/problem+json": {
          schema: ref("schemas", "IdempotencyProblem"),
          examples,
        },
      },
    };
    for (const [i, body] of bodies.entries()) {
      if (`${body.status}` !== status) continue;
      if (CASES[i] === "missing" && !required) continue;
      examples[body.code as string] = { summary: body.title!, value: body };
    }
  }
  const headers: Record<string, OpenApiValue> = {
    IdempotentReplayed: {
      description:
        `\`true\` on a replay: the first response to this key, its status, headers and body as recorded (header \`${replay}\`).`,
      schema: { type: "string", const: "true" },
    },
    IdempotentBodyOmitted: {
      description:
        `On a replay whose body was not recorded, why (header \`${BODY_OMITTED_HEADER}\`): the body is empty.`,
      schema: {
        type: "string",
        enum: ["too_large", "too_slow", "stream_error", "cancelled"],
      },
    },
    IdempotentOmittedHeaders: {
      description:
        `On a replay, the names of the first response's headers its record left out (header \`${HEADERS_OMITTED_HEADER}\`), comma-separated.`,
      schema: { type: "string" },
    },
    RetryAfter: {
      description: "Seconds to wait before retrying with the same key.",
      schema: { type: "integer", minimum: 1 },
    },
  };
  if (options.lifetimeHeader !== undefined) {
    const name = options.lifetimeHeader;
    headerName("lifetimeHeader", name);
    headers.IdempotencyLifetime = {
      description:
        `Provisional: the key's lifetime, on a first response and its replays (header \`${name}\`).`,
      schema: { type: "string" },
    };
  }
  return {
    components: {
      parameters: {
        IdempotencyKey: {
          name: header,
          in: "header",
          required,
          description:
            `A key unique to this request (a UUID v4): 1 to ${MAX_KEY_LENGTH} visible ASCII characters but a comma, bare or as an RFC 8941 string. Its retries send the same key and get its first response.`,
          schema: { type: "string", minLength: 1 },
        },
      },
      headers,
      schemas: { IdempotencyProblem: problemSchema(bodies) },
      responses,
    },
  };
}

/** The body the middleware sends for `kind` about a POST to `/payments`. */
async function example(
  kind: keyof ProblemTypes,
  header: string,
  maxRequestBytes: number,
): Promise<Record<string, OpenApiValue>> {
  const parsed = parseIdempotencyKey(""), retryAfter = 1;
  const reason = parsed.ok ? "" : parsed.reason;
  const request = new Request("http://api.test/payments", { method: "POST" });
  const details = { header, reason, retryAfter, maxRequestBytes };
  return await (await problemResponse(request, kind, details)).json();
}

/** The schema of the bodies: their members, as the middleware sends them. */
function problemSchema(bodies: Record<string, OpenApiValue>[]): OpenApiValue {
  const properties: Record<string, OpenApiValue> = {};
  for (const [name, value] of Object.entries(bodies[0]!)) {
    const type = typeof value === "number" ? "integer" : typeof value;
    properties[name] = { type };
  }
  properties.type = { type: "string", format: "uri" };
  properties.code = { type: "string", enum: bodies.map((body) => body.code!) };
  return {
    type: "object",
    description: "An RFC 9457 problem with a machine code (docs/problems.md).",
    required: Object.keys(properties),
    properties,
  };
}
