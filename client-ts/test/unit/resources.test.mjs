import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Page, isOrderEvent } from "../../dist/index.js";
import { BASE_URL, ORDER_PARAMS, PAGINATION, SANDBOX_KEY, json, order, product, stubClient } from "./helpers.mjs";

const ENDPOINT = {
  id: "we_1", url: "https://example.com/hook", events: ["order.created"], description: "Shop", enabled: true,
  disabled_reason: null, created_at: "2026-01-15T12:00:00Z", updated_at: "2026-01-15T12:00:00Z",
};
const EVENT = { id: "evt_1", type: "order.created", created_at: "2026-01-15T12:00:00Z", data: order() };

function path(call) {
  return call.url.pathname + call.url.search;
}

describe("requests", () => {
  test("headers: bearer key, JSON, a user agent", async () => {
    const { client, calls } = await stubClient([json(201, order())]);
    await client.orders.create(ORDER_PARAMS);
    const headers = calls[0].headers;
    assert.equal(headers.get("authorization"), `Bearer ${SANDBOX_KEY}`);
    assert.equal(headers.get("accept"), "application/json");
    assert.equal(headers.get("content-type"), "application/json");
    assert.match(headers.get("user-agent"), /^commerce-client-ts\/\d+\.\d+\.\d+ node\//);
    assert.ok(calls[0].url.href.startsWith(BASE_URL + "/"));
  });

  test("products: list, get", async () => {
    const { client, calls } = await stubClient([
      json(200, { data: [product(1)], pagination: PAGINATION(1, 50, 0) }),
      json(200, { ...product(1), inventory_count: 3, updated_at: "2026-01-15T12:00:00Z" }),
    ]);
    const page = await client.products.list({ category: "books", limit: 50, offset: 0 });
    assert.ok(page instanceof Page);
    assert.equal(page.data[0].price, 19.99);
    assert.equal(page.hasMore, false);
    assert.equal(page.nextOffset, null);
    const got = await client.products.get("prod_1");
    assert.equal(got.inventory_count, 3);
    assert.deepEqual(calls.map((c) => [c.method, path(c)]), [
      ["GET", "/v1/products?category=books&limit=50&offset=0"],
      ["GET", "/v1/products/prod_1"],
    ]);
  });

  test("products: list passes q and sort through; listAll keeps them on every page", async () => {
    const { client, calls } = await stubClient([
      json(200, { data: [product(1)], pagination: PAGINATION(2, 1, 0) }),
      json(200, { data: [product(1)], pagination: PAGINATION(2, 1, 0) }),
      json(200, { data: [product(2)], pagination: PAGINATION(2, 1, 1) }),
    ]);
    await client.products.list({ q: "blue mug", sort: "-price", category: "mugs", limit: 1 });
    const walked = [];
    for await (const item of client.products.listAll({ q: "mug", sort: "name", category: undefined }, { pageSize: 1 })) {
      walked.push(item.id);
    }
    assert.deepEqual(walked, ["prod_1", "prod_2"]);
    assert.deepEqual(calls.map(path), [
      "/v1/products?q=blue+mug&sort=-price&category=mugs&limit=1",
      "/v1/products?q=mug&sort=name&limit=1&offset=0",
      "/v1/products?q=mug&sort=name&limit=1&offset=1",
    ]);
  });

  test("products: create, update, archive (admin)", async () => {
    const full = { ...product(1), inventory_count: 4, updated_at: "2026-01-15T12:00:00Z" };
    const { client, calls } = await stubClient([
      json(201, full),
      json(200, { ...full, price: 9.99 }),
      new Response(null, { status: 204 }),
    ]);
    const created = await client.products.create({ name: "Book 1", price: 19.99, category: "books", inventory_count: 4 });
    assert.equal(created.inventory_count, 4);
    const updated = await client.products.update("prod_1", { price: 9.99, name: undefined });
    assert.equal(updated.price, 9.99);
    assert.equal(await client.products.archive("prod_1"), undefined);
    assert.deepEqual(calls.map((c) => [c.method, path(c)]), [
      ["POST", "/v1/products"],
      ["PATCH", "/v1/products/prod_1"],
      ["DELETE", "/v1/products/prod_1"],
    ]);
    assert.deepEqual(calls[0].body, { name: "Book 1", price: 19.99, category: "books", inventory_count: 4 });
    assert.ok(calls[0].headers.get("idempotency-key"));
    assert.deepEqual(calls[1].body, { price: 9.99 });
    assert.equal(calls[1].headers.get("idempotency-key"), null);
    assert.equal(calls[2].body, undefined);
  });

  test("categories: list resolves to the names and counts", async () => {
    const categories = [{ name: "books", product_count: 23 }, { name: "mugs", product_count: 1 }];
    const { client, calls } = await stubClient([json(200, { data: categories })]);
    assert.deepEqual(await client.categories.list(), categories);
    assert.deepEqual(calls.map((c) => [c.method, path(c)]), [["GET", "/v1/categories"]]);
  });

  test("orders: create, get, list, cancel, fulfill", async () => {
    const { client, calls } = await stubClient([
      json(201, order()),
      json(200, order()),
      json(200, { data: [order()], pagination: PAGINATION(1, 20, 0) }),
      json(200, order({ status: "canceled", canceled_at: "2026-01-15T12:01:00Z" })),
      json(200, order({ status: "fulfilled", fulfilled_at: "2026-01-15T12:01:00Z" })),
    ]);
    const created = await client.orders.create({ ...ORDER_PARAMS, shipping_address: { ...ORDER_PARAMS.shipping_address, line2: "Apt 4" } });
    assert.equal(created.status, "pending");
    assert.equal(created.total, 39.98);
    await client.orders.get("ord_1");
    await client.orders.list({ status: "pending", customer_id: "cus_123", limit: undefined, offset: null });
    assert.equal((await client.orders.cancel("ord_1")).status, "canceled");
    assert.equal((await client.orders.fulfill("ord_1")).status, "fulfilled");
    assert.deepEqual(calls.map((c) => [c.method, path(c)]), [
      ["POST", "/v1/orders"],
      ["GET", "/v1/orders/ord_1"],
      ["GET", "/v1/orders?status=pending&customer_id=cus_123"],
      ["POST", "/v1/orders/ord_1/cancel"],
      ["POST", "/v1/orders/ord_1/fulfill"],
    ]);
    assert.deepEqual(calls[0].body, {
      customer_id: "cus_123",
      items: [{ product_id: "prod_1", quantity: 2 }],
      shipping_address: { street: "1 Main St", city: "Springfield", postal_code: "12345", country: "US", line2: "Apt 4" },
    });
    assert.equal(calls[3].body, undefined);
    assert.equal(calls[3].headers.get("content-type"), null);
    assert.equal(calls[4].body, undefined, "no tracking: no body, the request as it always was");
  });

  test("orders: fulfill sends the tracking and reads it back", async () => {
    const tracking = { carrier: "UPS", number: "1Z999AA1", url: "https://track.example/1Z999AA1" };
    const fulfilled = { status: "fulfilled", fulfilled_at: "2026-01-15T12:01:00Z" };
    const { client, calls } = await stubClient([
      json(200, order({ ...fulfilled, tracking })),
      json(200, order({ ...fulfilled, tracking: { carrier: "DHL", number: "42", url: null } })),
    ]);
    const order1 = await client.orders.fulfill("ord_1", { tracking }, { idempotencyKey: "fulfil-1" });
    assert.deepEqual(order1.tracking, tracking);
    const order2 = await client.orders.fulfill("ord_2", { tracking: { carrier: "DHL", number: "42" } });
    assert.deepEqual(order2.tracking, { carrier: "DHL", number: "42", url: null });
    assert.deepEqual(calls.map((c) => [c.method, path(c)]), [
      ["POST", "/v1/orders/ord_1/fulfill"],
      ["POST", "/v1/orders/ord_2/fulfill"],
    ]);
    assert.deepEqual(calls[0].body, { tracking });
    assert.equal(calls[0].headers.get("content-type"), "application/json");
    assert.equal(calls[0].headers.get("idempotency-key"), "fulfil-1");
    assert.deepEqual(calls[1].body, { tracking: { carrier: "DHL", number: "42" } });
  });

  test("webhook endpoints: create, list, get, update, delete, rotateSecret", async () => {
    const { client, calls } = await stubClient([
      json(201, { ...ENDPOINT, secret: "whsec_AAAA" }),
      json(201, { ...ENDPOINT, events: [], description: null, secret: "whsec_CCCC" }),
      json(200, { data: [ENDPOINT], pagination: PAGINATION(1, 20, 0) }),
      json(200, ENDPOINT),
      json(200, { ...ENDPOINT, description: null }),
      json(200, ENDPOINT),
      new Response(null, { status: 204 }),
      json(200, { ...ENDPOINT, secret: "whsec_BBBB" }),
    ]);
    const created = await client.webhookEndpoints.create({ url: ENDPOINT.url, events: ["order.created"], description: "Shop" });
    assert.equal(created.secret, "whsec_AAAA");
    await client.webhookEndpoints.create({ url: ENDPOINT.url });
    await client.webhookEndpoints.list({ limit: 20 });
    await client.webhookEndpoints.get("we_1");
    await client.webhookEndpoints.update("we_1", { description: null, url: undefined });
    await client.webhookEndpoints.update("we_1", { url: "https://example.com/v2", events: ["order.fulfilled"], enabled: true });
    assert.equal(await client.webhookEndpoints.delete("we_1"), undefined);
    assert.equal((await client.webhookEndpoints.rotateSecret("we_1")).secret, "whsec_BBBB");
    assert.deepEqual(calls.map((c) => [c.method, path(c)]), [
      ["POST", "/v1/webhook_endpoints"],
      ["POST", "/v1/webhook_endpoints"],
      ["GET", "/v1/webhook_endpoints?limit=20"],
      ["GET", "/v1/webhook_endpoints/we_1"],
      ["PATCH", "/v1/webhook_endpoints/we_1"],
      ["PATCH", "/v1/webhook_endpoints/we_1"],
      ["DELETE", "/v1/webhook_endpoints/we_1"],
      ["POST", "/v1/webhook_endpoints/we_1/rotate_secret"],
    ]);
    assert.deepEqual(calls[0].body, { url: ENDPOINT.url, events: ["order.created"], description: "Shop" });
    assert.deepEqual(calls[1].body, { url: ENDPOINT.url });
    assert.deepEqual(calls[4].body, { description: null });
    assert.deepEqual(calls[5].body, { url: "https://example.com/v2", events: ["order.fulfilled"], enabled: true });
  });

  test("events: list, get, redeliver; isOrderEvent narrows", async () => {
    const { client, calls } = await stubClient([
      json(200, { data: [EVENT, { id: "evt_2", type: "invoice.paid", created_at: EVENT.created_at, data: { id: "inv_1" } }], pagination: PAGINATION(2, 20, 0) }),
      json(200, { ...EVENT, deliveries: [] }),
      json(200, { ...EVENT, deliveries: [{ endpoint_id: "we_1", status: "pending", next_attempt_at: "2026-01-15T12:00:05Z", attempts: [] }] }),
    ]);
    const page = await client.events.list({ type: "order.created" });
    assert.deepEqual(page.data.map(isOrderEvent), [true, false]);
    assert.equal((await client.events.get("evt_1")).deliveries.length, 0);
    const redelivered = await client.events.redeliver("evt_1");
    assert.equal(redelivered.deliveries[0].status, "pending");
    assert.deepEqual(calls.map((c) => [c.method, path(c)]), [
      ["GET", "/v1/events?type=order.created"],
      ["GET", "/v1/events/evt_1"],
      ["POST", "/v1/events/evt_1/redeliver"],
    ]);
  });

  test("ids are percent-encoded, so they cannot reach another route; empty ids are refused", async () => {
    const { client, calls } = await stubClient([json(200, order())]);
    await client.orders.get("../products/x?y=1");
    assert.equal(calls[0].url.pathname, "/v1/orders/..%2Fproducts%2Fx%3Fy%3D1");
    assert.equal(calls[0].url.search, "");
    await assert.rejects(client.orders.get(""), TypeError);
    await assert.rejects(client.events.get(undefined), TypeError);
    assert.equal(calls.length, 1);
  });
});
