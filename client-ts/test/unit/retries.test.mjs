import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  APIConnectionError,
  APITimeoutError,
  ConflictError,
  INITIAL_RETRY_DELAY_MS,
  InvalidRequestError,
  JITTER,
  MAX_RETRY_DELAY_MS,
  RateLimitError,
  ServerError,
} from "../../dist/index.js";
import { backoffDelayMs } from "../../dist/retry.js";
import { ORDER_PARAMS, apiError, json, networkError, order, product, stubClient } from "./helpers.mjs";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const PRODUCT = { ...product(1), inventory_count: 3, updated_at: "2026-01-15T12:00:00Z" };

function assertBackoff(delay, retriesDone) {
  const base = Math.min(INITIAL_RETRY_DELAY_MS * 2 ** retriesDone, MAX_RETRY_DELAY_MS);
  assert.ok(delay <= base && delay >= base * (1 - JITTER), `${delay} not within backoff ${retriesDone}`);
}

describe("backoff", () => {
  test("exponential from 0.5 s, capped at 8 s, reduced by up to a quarter", () => {
    assert.equal(backoffDelayMs(0, () => 0), 500);
    assert.equal(backoffDelayMs(1, () => 0), 1000);
    assert.equal(backoffDelayMs(2, () => 0), 2000);
    assert.equal(backoffDelayMs(4, () => 0), 8000);
    assert.equal(backoffDelayMs(10, () => 0), 8000);
    assert.equal(backoffDelayMs(0, () => 1), 375);
    assert.equal(backoffDelayMs(10, () => 1), 6000);
    for (let n = 0; n < 8; n++) assertBackoff(backoffDelayMs(n), n);
  });
});

describe("retries", () => {
  test("a 5xx is retried with backoff, then the answer is returned", async () => {
    const { client, calls, sleeps } = await stubClient([
      apiError(503, "server_error", "Unavailable", "req_1"),
      apiError(500, "server_error", "Boom", "req_2"),
      json(200, PRODUCT),
    ]);
    const result = await client.products.get("prod_1");
    assert.equal(result.id, "prod_1");
    assert.equal(calls.length, 3);
    assert.equal(sleeps.length, 2);
    assertBackoff(sleeps[0], 0);
    assertBackoff(sleeps[1], 1);
  });

  test("after maxRetries the last error is thrown: 3 attempts by default", async () => {
    const { client, calls, sleeps } = await stubClient([
      apiError(502, "server_error", "a"),
      apiError(502, "server_error", "b"),
      apiError(502, "server_error", "c", "req_x"),
    ]);
    await assert.rejects(client.products.get("prod_1"), (error) => {
      assert.ok(error instanceof ServerError);
      assert.equal(error.message, "c");
      assert.equal(error.details, "req_x");
      assert.equal(error.statusCode, 502);
      return true;
    });
    assert.equal(calls.length, 3);
    assert.equal(sleeps.length, 2);
  });

  test("maxRetries: 0 sends once", async () => {
    const { client, calls } = await stubClient([apiError(503, "server_error", "a")], { maxRetries: 0 });
    await assert.rejects(client.products.get("prod_1"), ServerError);
    assert.equal(calls.length, 1);
  });

  test("a 429's Retry-After is honoured", async () => {
    const { client, calls, sleeps } = await stubClient([
      apiError(429, "rate_limited", "Slow down", "", { "retry-after": "2" }),
      json(200, PRODUCT),
    ]);
    await client.products.get("prod_1");
    assert.equal(calls.length, 2);
    assert.deepEqual(sleeps, [2000]);
  });

  test("Retry-After as an HTTP date is honoured", async () => {
    const when = new Date(Date.now() + 30_000).toUTCString();
    const { client, sleeps } = await stubClient([
      apiError(503, "server_error", "x", "", { "retry-after": when }),
      json(200, PRODUCT),
    ]);
    await client.products.get("prod_1");
    assert.ok(sleeps[0] > 25_000 && sleeps[0] <= 30_000, String(sleeps[0]));
  });

  test("a Retry-After over 60 s is not waited for: RateLimitError at once, with retryAfter", async () => {
    const { client, calls, sleeps } = await stubClient([
      apiError(429, "rate_limited", "Quota spent", "", { "retry-after": "3600" }),
    ]);
    await assert.rejects(client.products.get("prod_1"), (error) => {
      assert.ok(error instanceof RateLimitError);
      assert.equal(error.retryAfter, 3600);
      assert.equal(error.code, "rate_limited");
      return true;
    });
    assert.equal(calls.length, 1);
    assert.equal(sleeps.length, 0);
  });

  test("429s exhaust the retries, then RateLimitError", async () => {
    const limited = () => apiError(429, "rate_limited", "Slow down", "", { "retry-after": "1" });
    const { client, calls, sleeps } = await stubClient([limited(), limited(), limited()]);
    await assert.rejects(client.products.list(), RateLimitError);
    assert.equal(calls.length, 3);
    assert.deepEqual(sleeps, [1000, 1000]);
  });

  test("network errors are retried, then succeed", async () => {
    const { client, calls, sleeps } = await stubClient([networkError(), networkError("ECONNRESET"), json(200, PRODUCT)]);
    await client.products.get("prod_1");
    assert.equal(calls.length, 3);
    assertBackoff(sleeps[0], 0);
    assertBackoff(sleeps[1], 1);
  });

  test("network errors that persist become APIConnectionError", async () => {
    const { client, calls } = await stubClient([networkError(), networkError(), networkError()]);
    await assert.rejects(client.products.get("prod_1"), (error) => {
      assert.ok(error instanceof APIConnectionError);
      assert.ok(!(error instanceof APITimeoutError));
      assert.equal(error.statusCode, null);
      assert.equal(error.code, null);
      assert.match(error.message, /GET http:\/\/api\.test\/v1\/products\/prod_1 failed .*ECONNREFUSED/);
      assert.ok(error.cause instanceof TypeError);
      return true;
    });
    assert.equal(calls.length, 3);
  });

  test("a timeout aborts the attempt, is retried, and becomes APITimeoutError", async () => {
    // AbortSignal.timeout()'s timer does not keep Node alive (a real socket would): this one does.
    const hang = (call) =>
      new Promise((_, reject) => {
        const keepAlive = setTimeout(() => reject(new Error("the timeout never fired")), 5_000);
        call.signal.addEventListener("abort", () => {
          clearTimeout(keepAlive);
          reject(call.signal.reason);
        });
      });
    const { client, calls } = await stubClient([hang, hang], { timeoutMs: 20, maxRetries: 1 });
    await assert.rejects(client.products.get("prod_1"), (error) => {
      assert.ok(error instanceof APITimeoutError);
      assert.ok(error instanceof APIConnectionError);
      assert.match(error.message, /timed out/);
      return true;
    });
    assert.equal(calls.length, 2);
  });

  test("other 4xx are not retried", async () => {
    for (const [status, code] of [
      [400, "invalid_request"],
      [401, "unauthorized"],
      [403, "unauthorized"],
      [404, "not_found"],
      [422, "invalid_request"],
    ]) {
      const { client, calls } = await stubClient([apiError(status, code, "no")]);
      await assert.rejects(client.products.get("prod_1"));
      assert.equal(calls.length, 1, String(status));
    }
  });
});

describe("idempotency keys", () => {
  test("every POST sends one: a UUID per call, the same on each retry of the call", async () => {
    const { client, calls } = await stubClient([
      apiError(503, "server_error", "x"),
      networkError(),
      json(201, order()),
      json(201, order({ id: "ord_2" })),
    ]);
    await client.orders.create(ORDER_PARAMS);
    await client.orders.create(ORDER_PARAMS);
    const keys = calls.map((call) => call.headers.get("idempotency-key"));
    assert.match(keys[0], UUID);
    assert.equal(keys[1], keys[0]);
    assert.equal(keys[2], keys[0]);
    assert.match(keys[3], UUID);
    assert.notEqual(keys[3], keys[0]);
  });

  test("every POST method sends one; GET, PATCH and DELETE do not", async () => {
    const endpoint = {
      id: "we_1", url: "https://example.com/hook", events: [], description: null, enabled: true,
      disabled_reason: null, created_at: "2026-01-15T12:00:00Z", updated_at: "2026-01-15T12:00:00Z",
    };
    const event = { id: "evt_1", type: "order.created", created_at: "2026-01-15T12:00:00Z", data: order(), deliveries: [] };
    const { client, calls } = await stubClient([
      json(200, order({ status: "canceled" })),
      json(200, order({ status: "fulfilled" })),
      json(201, { ...endpoint, secret: "whsec_AAAA" }),
      json(200, { ...endpoint, secret: "whsec_BBBB" }),
      json(200, event),
      json(200, order()),
      json(200, endpoint),
      json(204, null),
    ]);
    await client.orders.cancel("ord_1");
    await client.orders.fulfill("ord_1");
    await client.webhookEndpoints.create({ url: "https://example.com/hook" });
    await client.webhookEndpoints.rotateSecret("we_1");
    await client.events.redeliver("evt_1");
    await client.orders.get("ord_1");
    await client.webhookEndpoints.update("we_1", { enabled: true });
    await client.webhookEndpoints.delete("we_1");
    const posts = calls.filter((call) => call.method === "POST");
    assert.equal(posts.length, 5);
    for (const call of posts) assert.match(call.headers.get("idempotency-key"), UUID);
    assert.equal(new Set(posts.map((call) => call.headers.get("idempotency-key"))).size, 5);
    for (const call of calls.filter((c) => c.method !== "POST")) assert.equal(call.headers.get("idempotency-key"), null);
  });

  test("a key of your own is sent, and reused on retries", async () => {
    const { client, calls } = await stubClient([apiError(500, "server_error", "x"), json(201, order())]);
    await client.orders.create(ORDER_PARAMS, { idempotencyKey: "checkout-42" });
    assert.deepEqual(calls.map((c) => c.headers.get("idempotency-key")), ["checkout-42", "checkout-42"]);
  });

  test("the 409 whose details is Idempotency-Key (still in flight) is retried with the same key", async () => {
    const { client, calls, sleeps } = await stubClient([
      apiError(409, "invalid_request", "A request with this Idempotency-Key is in progress.", "Idempotency-Key"),
      json(201, order()),
    ]);
    const created = await client.orders.create(ORDER_PARAMS);
    assert.equal(created.id, "ord_1");
    assert.equal(calls.length, 2);
    assert.equal(calls[1].headers.get("idempotency-key"), calls[0].headers.get("idempotency-key"));
    assertBackoff(sleeps[0], 0);
  });

  test("other 409s (out of stock, illegal transition) are thrown at once", async () => {
    const { client, calls } = await stubClient([
      apiError(409, "invalid_request", "Not enough stock", "items[0].quantity"),
    ]);
    await assert.rejects(client.orders.create(ORDER_PARAMS), (error) => {
      assert.ok(error instanceof ConflictError);
      assert.ok(error instanceof InvalidRequestError);
      assert.equal(error.details, "items[0].quantity");
      return true;
    });
    assert.equal(calls.length, 1);
  });
});
