// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * The payments handler the store examples share, and the scope they guard it
 * with. `charge` stands in for a payment provider: the side effect that must
 * not happen twice; `accountOf` for your authentication.
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

/** The API keys this example accepts, and the account each one acts for. */
const ACCOUNTS = new Map([
  ["sk_test_alice", "acct_1"],
  ["sk_test_bob", "acct_2"],
]);

/**
 * The `scope` of a payment: the stable id of the account the request acts
 * for, looked up from its credentials (`Authorization: Bearer <API key>`).
 * It stands in for your authentication, which must have resolved the caller
 * before the middleware asks: the scope is the account's id, never the
 * credential itself, so that a retry sent after a key rotation still finds
 * its record. Callers without a known key share the `"anonymous"` scope
 * here; a real API refuses them before this point.
 *
 * @param req The request.
 * @returns The account's id.
 */
export function accountOf(req: Request): string {
  const token = req.headers.get("authorization")?.replace(/^Bearer /, "");
  return ACCOUNTS.get(token ?? "") ?? "anonymous";
}
