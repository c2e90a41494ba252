// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The app the request-path benchmarks measure: a small JSON payments
 * handler that reads its body and answers 201.
 *
 * @module
 */

/** The request body the benchmarks send. */
export const payload: string = JSON.stringify({
  amount: 1999,
  currency: "eur",
  customer: "cus_8fQ2",
  note: "x".repeat(64),
});

const answer = JSON.stringify({
  id: "pay_1",
  status: "succeeded",
  amount: 1999,
});

/**
 * Reads the request body and answers 201 with a small JSON body.
 *
 * @param req The request.
 * @returns The response.
 */
export async function handler(req: Request): Promise<Response> {
  await req.arrayBuffer();
  return new Response(answer, {
    status: 201,
    headers: { "content-type": "application/json" },
  });
}
