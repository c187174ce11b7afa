import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  APIStatusError,
  AuthenticationError,
  CommerceError,
  ConflictError,
  IdempotencyError,
  InvalidRequestError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
} from "../../dist/index.js";
import { apiError, json, stubClient } from "./helpers.mjs";

describe("error mapping", () => {
  const cases = [
    [400, "invalid_request", InvalidRequestError],
    [401, "unauthorized", AuthenticationError],
    [403, "unauthorized", PermissionDeniedError],
    [404, "not_found", NotFoundError],
    [405, "invalid_request", InvalidRequestError],
    [409, "invalid_request", ConflictError],
    [413, "invalid_request", InvalidRequestError],
    [415, "invalid_request", InvalidRequestError],
    [422, "invalid_request", IdempotencyError],
    [429, "rate_limited", RateLimitError],
    [500, "server_error", ServerError],
    [503, "server_error", ServerError],
  ];
  for (const [status, code, cls] of cases) {
    test(`${status} → ${cls.name}`, async () => {
      const { client } = await stubClient([apiError(status, code, `msg ${status}`, "customer_id", { "retry-after": "120" })]);
      await assert.rejects(client.orders.get("ord_1"), (error) => {
        assert.equal(error.constructor, cls);
        assert.ok(error instanceof CommerceError);
        assert.ok(error instanceof APIStatusError);
        assert.deepEqual(error.body, { error: { code, message: `msg ${status}`, details: "customer_id" } });
        assert.equal(error.name, cls.name);
        assert.equal(error.code, code);
        assert.equal(error.message, `msg ${status}`);
        assert.equal(error.details, "customer_id");
        assert.equal(error.statusCode, status);
        assert.equal(error.requestId, `req_${status}`);
        assert.deepEqual(error.rateLimit, { limit: 1000, remaining: 998, reset: 1768482000 });
        assert.match(String(error), new RegExp(`${cls.name}: msg ${status} \\(status ${status}, code ${code}`));
        return true;
      });
    });
  }

  test("every problem of the request is on the error, typed; none when the body has none", async () => {
    const problems = [
      { parameter: "customer_id", reason: "validation_failed", message: "Missing required parameter `customer_id`." },
      { parameter: "items[0].quantity", reason: "validation_failed", message: "Invalid value for `items[0].quantity`: must be at least 1." },
      { parameter: "colour", reason: "validation_failed", message: "Unknown parameter `colour`." },
    ];
    const body = { error: { code: "invalid_request", reason: "validation_failed", message: "The request has 3 problems: …", details: "customer_id", problems } };
    const { client } = await stubClient([json(400, body), apiError(400, "invalid_request", "old server", "customer_id")]);
    await assert.rejects(client.orders.get("ord_1"), (error) => {
      assert.ok(error instanceof InvalidRequestError);
      assert.equal(error.details, "customer_id");
      assert.deepEqual(error.problems, problems);
      return true;
    });
    await assert.rejects(client.orders.get("ord_1"), (error) => {
      assert.deepEqual(error.problems, []);
      return true;
    });
  });

  test("a body that is not the API's envelope still gives the right class", async () => {
    const { client } = await stubClient([
      new Response("<html>Bad Gateway</html>", { status: 404, statusText: "Not Found", headers: { "content-type": "text/html" } }),
    ]);
    await assert.rejects(client.products.get("prod_x"), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.code, null);
      assert.equal(error.details, "");
      assert.equal(error.message, "The API answered 404 Not Found.");
      assert.equal(error.rateLimit, null);
      return true;
    });
  });

  test("a success whose body is not JSON is a CommerceError", async () => {
    const { client } = await stubClient([new Response("oops", { status: 200, headers: { "x-request-id": "req_9" } })]);
    await assert.rejects(client.products.get("prod_1"), (error) => {
      assert.equal(error.constructor, CommerceError);
      assert.equal(error.statusCode, 200);
      assert.equal(error.requestId, "req_9");
      return true;
    });
  });

  test("lastRateLimit follows every response, errors included", async () => {
    const { client } = await stubClient([
      json(200, { data: [], pagination: { total: 0, limit: 20, offset: 0, has_more: false } }, { "x-ratelimit-remaining": "41" }),
      apiError(404, "not_found", "No such product"),
      new Response("{}", { status: 200 }),
    ]);
    await client.products.list();
    assert.deepEqual(client.lastRateLimit, { limit: 1000, remaining: 41, reset: 1768482000 });
    await assert.rejects(client.products.get("prod_x"), NotFoundError);
    assert.equal(client.lastRateLimit.remaining, 998);
    await client.products.get("prod_y");
    assert.equal(client.lastRateLimit, null);
  });
});
