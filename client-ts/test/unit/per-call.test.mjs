// Per-call control: options as the last argument of every method (timeout, retries, headers,
// idempotency key), and withResponse (a call's status, headers, request id and rate-limit
// figures with its result, per call even with other calls in flight).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ServerError } from "../../dist/index.js";
import { apiError, json, product, stubClient } from "./helpers.mjs";

describe("per-call options", () => {
  test("headers are added to that call only, and Authorization cannot be replaced", async () => {
    const { client, calls } = await stubClient([json(200, product(1)), json(200, product(1))]);
    await client.products.get("prod_1", { headers: { "X-Trace": "abc", Authorization: "Bearer other" } });
    assert.equal(calls[0].headers.get("x-trace"), "abc");
    assert.match(calls[0].headers.get("authorization"), /^Bearer sk_sandbox_/);
    await client.products.get("prod_1");
    assert.equal(calls[1].headers.get("x-trace"), null);
  });

  test("maxRetries applies to that call only", async () => {
    const failing = () => apiError(503, "server_error", "down");
    const { client, calls } = await stubClient([failing, failing, failing, failing], { maxRetries: 2 });
    await assert.rejects(client.orders.get("ord_1", { maxRetries: 0 }), ServerError);
    assert.equal(calls.length, 1);
    await assert.rejects(client.orders.get("ord_1"), ServerError);
    assert.equal(calls.length, 1 + 3);
  });

  test("timeoutMs bounds each attempt of that call", async () => {
    // Answers after 2 s (a ref'd timer: AbortSignal.timeout alone does not keep Node running).
    const hang = (call) =>
      new Promise((resolve, reject) => {
        const later = setTimeout(() => resolve(json(200, product(1))), 2000);
        call.signal.addEventListener("abort", () => {
          clearTimeout(later);
          reject(call.signal.reason);
        });
      });
    const { client } = await stubClient([hang], { maxRetries: 0 });
    const started = Date.now();
    await assert.rejects(client.products.get("prod_1", { timeoutMs: 50 }), { name: "APITimeoutError" });
    assert.ok(Date.now() - started < 5000);
  });

  test("a bad per-call value is a TypeError", async () => {
    const { client } = await stubClient([]);
    await assert.rejects(client.products.get("prod_1", { maxRetries: -1 }), TypeError);
    await assert.rejects(client.products.get("prod_1", { timeoutMs: 0 }), TypeError);
  });

  test("an idempotency key is sent with a POST", async () => {
    const { client, calls } = await stubClient([json(200, { id: "ord_1" })]);
    await client.orders.cancel("ord_1", { idempotencyKey: "key-1" });
    assert.equal(calls[0].headers.get("idempotency-key"), "key-1");
  });
});

describe("withResponse", () => {
  test("returns the result with the response of its last attempt", async () => {
    const { client } = await stubClient([
      apiError(503, "server_error", "down"),
      json(200, product(1), { "x-request-id": "req_ok", "x-ratelimit-remaining": "7" }),
    ]);
    const { data, response } = await client.withResponse((options) => client.products.get("prod_1", options));
    assert.equal(data.id, "prod_1");
    assert.equal(response.status, 200);
    assert.equal(response.requestId, "req_ok");
    assert.equal(response.retries, 1);
    assert.equal(response.headers.get("x-request-id"), "req_ok");
  });

  test("concurrent calls each get their own response", async () => {
    const answer = (call) => {
      const id = call.url.pathname.split("/").pop();
      const delay = id === "prod_slow" ? 50 : 0;
      return new Promise((resolve) =>
        setTimeout(() => resolve(json(200, { ...product(1), id }, { "x-request-id": `req_${id}` })), delay),
      );
    };
    const { client } = await stubClient([answer, answer]);
    const [slow, fast] = await Promise.all([
      client.withResponse((options) => client.products.get("prod_slow", options)),
      client.withResponse((options) => client.products.get("prod_fast", options)),
    ]);
    assert.deepEqual([slow.data.id, slow.response.requestId], ["prod_slow", "req_prod_slow"]);
    assert.deepEqual([fast.data.id, fast.response.requestId], ["prod_fast", "req_prod_fast"]);
  });

  test("a call that does not pass the options is a TypeError", async () => {
    const { client } = await stubClient([json(200, product(1))]);
    await assert.rejects(client.withResponse(() => client.products.get("prod_1")), TypeError);
  });
});
