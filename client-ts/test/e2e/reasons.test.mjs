// End to end against a real `commerce-api serve --demo` (see server.mjs): each failure throws
// its typed error, with the API's `reason`.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as lib from "../../dist/index.js";
import { ADDRESS, SKIP, startServer } from "./server.mjs";

let server;
let client;
let admin;

before(async () => {
  if (SKIP) return;
  server = await startServer();
  client = new lib.CommerceClient({ apiKey: server.clientKey, environment: "sandbox", baseUrl: server.baseUrl });
  admin = new lib.CommerceClient({ apiKey: server.adminKey, environment: "sandbox", baseUrl: server.baseUrl });
});

after(async () => {
  await server?.stop();
});

async function aBook() {
  const [book] = (await client.products.list({ category: "books", limit: 1 })).data;
  return book;
}

function orderOf(productId, quantity = 1, customer = `cus_${crypto.randomUUID()}`) {
  return { customer_id: customer, items: [{ product_id: productId, quantity }], shipping_address: ADDRESS };
}

describe("e2e: reasons", { skip: SKIP }, () => {
  test("not enough stock is InsufficientStockError (a ConflictError), reason insufficient_stock", async () => {
    const book = await aBook();
    const product = await client.products.get(book.id);
    await assert.rejects(client.orders.create(orderOf(book.id, product.inventory_count + 1)), (error) => {
      assert.equal(error.constructor, lib.InsufficientStockError);
      assert.ok(error instanceof lib.ConflictError);
      assert.equal(error.reason, "insufficient_stock");
      assert.equal(error.code, "invalid_request");
      assert.equal(error.details, "items[0].quantity");
      return true;
    });
  });

  test("canceling twice is InvalidTransitionError, reason invalid_transition", async () => {
    const order = await client.orders.create(orderOf((await aBook()).id));
    await client.orders.cancel(order.id);
    await assert.rejects(client.orders.cancel(order.id), (error) => {
      assert.equal(error.constructor, lib.InvalidTransitionError);
      assert.equal(error.reason, "invalid_transition");
      assert.equal(error.statusCode, 409);
      return true;
    });
  });

  test("a key reused with another request is IdempotencyKeyReusedError, reason idempotency_key_reused", async () => {
    const book = await aBook();
    const key = crypto.randomUUID();
    await client.orders.create(orderOf(book.id, 1, "cus_reuse"), { idempotencyKey: key });
    await assert.rejects(client.orders.create(orderOf(book.id, 2, "cus_reuse"), { idempotencyKey: key }), (error) => {
      assert.equal(error.constructor, lib.IdempotencyKeyReusedError);
      assert.ok(error instanceof lib.IdempotencyError);
      assert.equal(error.reason, "idempotency_key_reused");
      return true;
    });
  });

  test("an invalid value is ValidationFailedError naming it; an unknown order is not_found", async () => {
    const order = { ...orderOf((await aBook()).id), shipping_address: { ...ADDRESS, country: "XX" } };
    await assert.rejects(client.orders.create(order), (error) => {
      assert.equal(error.constructor, lib.ValidationFailedError);
      assert.equal(error.reason, "validation_failed");
      assert.equal(error.details, "shipping_address.country");
      return true;
    });
    await assert.rejects(client.orders.get("ord_missing"), (error) => {
      assert.equal(error.constructor, lib.NotFoundError);
      assert.equal(error.reason, "not_found");
      return true;
    });
  });

  test("three bad fields are three problems, the first also in details", async () => {
    const book = await aBook();
    const order = {
      customer_id: "",
      items: [{ product_id: book.id, quantity: 0 }],
      shipping_address: { ...ADDRESS, country: "XX" },
    };
    await assert.rejects(client.orders.create(order), (error) => {
      assert.equal(error.constructor, lib.ValidationFailedError);
      assert.equal(error.details, "customer_id");
      assert.deepEqual(
        error.problems.map((problem) => problem.parameter),
        ["customer_id", "items[0].quantity", "shipping_address.country"],
      );
      for (const problem of error.problems) {
        assert.equal(problem.reason, "validation_failed");
        assert.ok(problem.message.includes(problem.parameter), problem.message);
      }
      return true;
    });
  });

  test("keys say why they are refused: invalid_api_key, forbidden", async () => {
    const unknown = new lib.CommerceClient({ apiKey: `sk_sandbox_${"x".repeat(32)}`, baseUrl: server.baseUrl });
    await assert.rejects(unknown.products.list(), (error) => {
      assert.equal(error.constructor, lib.AuthenticationError);
      assert.equal(error.reason, "invalid_api_key");
      return true;
    });
    await assert.rejects(admin.orders.create(orderOf((await aBook()).id)), (error) => {
      assert.equal(error.constructor, lib.PermissionDeniedError);
      assert.equal(error.reason, "forbidden");
      return true;
    });
  });

  test("a spent quota is QuotaExceededError (a RateLimitError), reason quota_exceeded", async () => {
    // A server of its own: the demo account (development tier) may make one request a window.
    const limited = await startServer({ env: { COMMERCE_RATE_LIMIT_DEVELOPMENT: "1" } });
    try {
      const spent = new lib.CommerceClient({ apiKey: limited.clientKey, baseUrl: limited.baseUrl, maxRetries: 0 });
      await spent.products.list();
      await assert.rejects(spent.products.list(), (error) => {
        assert.equal(error.constructor, lib.QuotaExceededError);
        assert.ok(error instanceof lib.RateLimitError);
        assert.equal(error.reason, "quota_exceeded");
        assert.ok(error.retryAfter > 0);
        return true;
      });
    } finally {
      await limited.stop();
    }
  });
});
