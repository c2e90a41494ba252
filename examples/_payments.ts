// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The payments handler the store examples share. `charge` stands in for a
 * payment provider: the side effect that must not happen twice.
 *
 * @module
 */

let nextId = 1;

/**
 * Charges `amount` (a stand-in that takes 50 ms).
 *
 * @param amount The amount, in cents.
 * @returns The payment.
 */
export async function charge(
  amount: number,
): Promise<{ id: string; amount: number }> {
  await new Promise((resolve) => setTimeout(resolve, 50));
  return { id: `pay_${nextId++}`, amount };
}

/**
 * `POST /payments` with `{"amount": …}`: charges it and answers 201.
 *
 * @param req The request.
 * @returns The payment, as JSON.
 */
export async function handler(req: Request): Promise<Response> {
  const { amount } = await req.json();
  const payment = await charge(amount); // runs once per Idempotency-Key
  return Response.json(payment, { status: 201 });
}
