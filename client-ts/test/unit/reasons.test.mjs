// The API's `reason`: on every error, the typed subclass of the common ones, and the retry
// decision of a 409.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as lib from "../../dist/index.js";
import { ORDER_PARAMS, json, order, stubClient } from "./helpers.mjs";

function reasoned(status, code, reason, details = "", headers = {}) {
  return json(status, { error: { code, reason, message: `why: ${reason}`, details } }, headers);
}

describe("reasons", () => {
  test("the typed classes refine the classes of their status", () => {
    assert.ok(lib.ValidationFailedError.prototype instanceof lib.InvalidRequestError);
    for (const cls of [lib.InsufficientStockError, lib.InvalidTransitionError, lib.IdempotencyKeyInUseError]) {
      assert.ok(cls.prototype instanceof lib.ConflictError, cls.name);
    }
    assert.ok(lib.IdempotencyKeyReusedError.prototype instanceof lib.IdempotencyError);
    assert.ok(lib.QuotaExceededError.prototype instanceof lib.RateLimitError);
  });

  const cases = [
    [400, "invalid_request", "validation_failed", lib.ValidationFailedError],
    [409, "invalid_request", "insufficient_stock", lib.InsufficientStockError],
    [409, "invalid_request", "invalid_transition", lib.InvalidTransitionError],
    [409, "invalid_request", "idempotency_key_in_use", lib.IdempotencyKeyInUseError],
    [422, "invalid_request", "idempotency_key_reused", lib.IdempotencyKeyReusedError],
    [429, "rate_limited", "quota_exceeded", lib.QuotaExceededError],
    // Reasons without a class of their own: the status's class, with the reason.
    [404, "not_found", "unknown_route", lib.NotFoundError],
    [400, "invalid_request", "malformed_request", lib.InvalidRequestError],
    [403, "unauthorized", "forbidden", lib.PermissionDeniedError],
    // A reason this version does not know.
    [409, "invalid_request", "something_new", lib.ConflictError],
    // A reason whose class does not fit the status is not believed over the status.
    [400, "invalid_request", "insufficient_stock", lib.InvalidRequestError],
  ];
  for (const [status, code, reason, cls] of cases) {
    test(`${status} ${reason} → ${cls.name}`, async () => {
      const answer = reasoned(status, code, reason, "items[0].quantity", { "retry-after": "7" });
      const { client } = await stubClient([answer], { maxRetries: 0 });
      await assert.rejects(client.products.get("prod_1"), (error) => {
        assert.equal(error.constructor, cls);
        assert.equal(error.name, cls.name);
        assert.equal(error.reason, reason);
        assert.equal(error.code, code);
        assert.match(String(error), new RegExp(`reason ${reason}`));
        if (error instanceof lib.RateLimitError) assert.equal(error.retryAfter, 7);
        return true;
      });
    });
  }

  test("an error from a server before reasons has reason null", async () => {
    const body = { error: { code: "invalid_request", message: "Not enough stock.", details: "items[0].quantity" } };
    const { client } = await stubClient([json(409, body)]);
    await assert.rejects(client.orders.create(ORDER_PARAMS), (error) => {
      assert.equal(error.constructor, lib.ConflictError);
      assert.equal(error.reason, null);
      return true;
    });
  });

  const retries = [
    ["idempotency_key_in_use", "Idempotency-Key", true],
    ["insufficient_stock", "items[0].quantity", false],
    ["invalid_transition", "status", false],
    // The reason decides over `details` when the server gives one.
    ["insufficient_stock", "Idempotency-Key", false],
  ];
  for (const [reason, details, retried] of retries) {
    test(`a 409 ${reason} naming ${details} is ${retried ? "" : "not "}retried`, async () => {
      const { client, calls } = await stubClient([reasoned(409, "invalid_request", reason, details), json(201, order())]);
      if (retried) {
        await client.orders.create(ORDER_PARAMS);
      } else {
        await assert.rejects(client.orders.create(ORDER_PARAMS), (error) => error.reason === reason);
      }
      assert.equal(calls.length, retried ? 2 : 1);
    });
  }
});
