// End to end against a real `commerce-api serve --demo` (see server.mjs): every resource of the
// client, its errors, idempotency and pagination, on the wire.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";

import {
  APIConnectionError,
  AuthenticationError,
  CommerceClient,
  ConflictError,
  IdempotencyError,
  InvalidRequestError,
  NotFoundError,
  PermissionDeniedError,
  ValidationFailedError,
} from "../../dist/index.js";
import { ADDRESS, HOST, SKIP, freePort, startServer } from "./server.mjs";

let server;
let client;
let admin;
let requests = 0;

const countingFetch = (...args) => {
  requests++;
  return fetch(...args);
};

before(async () => {
  if (SKIP) return;
  server = await startServer();
  client = new CommerceClient({ apiKey: server.clientKey, environment: "sandbox", baseUrl: server.baseUrl, fetch: countingFetch });
  admin = new CommerceClient({ apiKey: server.adminKey, environment: "sandbox", baseUrl: server.baseUrl });
});

after(async () => {
  await server?.stop();
});

async function books() {
  const page = await client.products.list({ category: "books", limit: 3 });
  return page.data;
}

describe("e2e: products", { skip: SKIP }, () => {
  test("list: the default page, a category, clamped limits", async () => {
    const first = await client.products.list();
    assert.equal(first.data.length, 20);
    assert.deepEqual(first.pagination, { total: 60, limit: 20, offset: 0, has_more: true });
    assert.equal(first.nextOffset, 20);
    const clamped = await client.products.list({ limit: 500 });
    assert.equal(clamped.pagination.limit, 100);
    assert.equal(clamped.data.length, 60);
    const page = await client.products.list({ category: "books", limit: 3, offset: 9 });
    assert.deepEqual(page.pagination, { total: 10, limit: 3, offset: 9, has_more: false });
    assert.equal(page.data.length, 1);
    const past = await client.products.list({ offset: 1000 });
    assert.deepEqual(past.data, []);
    assert.equal(past.hasMore, false);
    const item = first.data[0];
    assert.deepEqual(Object.keys(item).sort(), ["category", "created_at", "description", "id", "name", "price"]);
    assert.equal(typeof item.price, "number");
  });

  test("listAll walks every page without repeats", async () => {
    const ids = [];
    for await (const product of client.products.listAll({ category: "books" }, { pageSize: 3 })) ids.push(product.id);
    assert.equal(ids.length, 10);
    assert.equal(new Set(ids).size, 10);
    const all = [];
    for await (const product of client.products.listAll()) all.push(product);
    assert.equal(all.length, 60);
  });

  test("get: a product with its stock; an unknown id is NotFoundError", async () => {
    const [book] = await books();
    const product = await client.products.get(book.id);
    assert.equal(product.id, book.id);
    assert.equal(typeof product.inventory_count, "number");
    assert.equal(typeof product.updated_at, "string");
    await assert.rejects(client.products.get("prod_does_not_exist"), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.statusCode, 404);
      assert.equal(error.code, "not_found");
      assert.ok(error.requestId);
      return true;
    });
    assert.ok(client.lastRateLimit.limit >= 1000);
    assert.ok(client.lastRateLimit.remaining < client.lastRateLimit.limit);
  });
});

describe("e2e: OpenAPI", { skip: SKIP }, () => {
  test("the running server serves the document the types were generated from", async () => {
    const response = await fetch(`${server.baseUrl}/openapi.json`);
    assert.equal(response.status, 200);
    const snapshot = JSON.parse(readFileSync(new URL("../../openapi.json", import.meta.url), "utf8"));
    assert.deepStrictEqual(await response.json(), snapshot, "client-ts/openapi.json is stale: npm run openapi:update");
  });
});

describe("e2e: authentication", { skip: SKIP }, () => {
  test("an unknown key is AuthenticationError, not retried", async () => {
    const bogus = new CommerceClient({ apiKey: "sk_sandbox_not_a_real_key", baseUrl: server.baseUrl });
    await assert.rejects(bogus.products.list(), (error) => {
      assert.equal(error.constructor, AuthenticationError);
      assert.equal(error.statusCode, 401);
      assert.equal(error.code, "unauthorized");
      return true;
    });
    assert.ok(bogus.lastRateLimit !== null);
  });

  test("a client key on an admin operation is PermissionDeniedError", async () => {
    await assert.rejects(
      client._request("create_product", { body: { name: "Nope", price: 1, category: "x" } }),
      (error) => error instanceof PermissionDeniedError && error.statusCode === 403,
    );
  });

  test("a key for the other environment is refused before any request", () => {
    assert.throws(
      () => new CommerceClient({ apiKey: server.clientKey, environment: "production", baseUrl: server.baseUrl }),
      TypeError,
    );
  });
});

describe("e2e: orders", { skip: SKIP }, () => {
  test("create, get, list, listAll, cancel; a second cancel is a ConflictError sent once", async () => {
    const [a, b] = await books();
    const customer = `cus_${Date.now()}`;
    const stockBefore = (await client.products.get(a.id)).inventory_count;
    const order = await client.orders.create({
      customer_id: customer,
      items: [{ product_id: a.id, quantity: 2 }, { product_id: b.id, quantity: 1 }],
      shipping_address: { ...ADDRESS, line2: "Apt 4" },
    });
    assert.match(order.id, /^ord_/);
    assert.equal(order.status, "pending");
    assert.equal(order.currency, "USD");
    assert.equal(order.total, Math.round((2 * a.price + b.price) * 100) / 100);
    assert.deepEqual(order.items.map((item) => [item.product_id, item.quantity, item.unit_price]), [
      [a.id, 2, a.price],
      [b.id, 1, b.price],
    ]);
    assert.equal(order.shipping_address.line2, "Apt 4");
    assert.equal((await client.products.get(a.id)).inventory_count, stockBefore - 2);

    assert.deepEqual(await client.orders.get(order.id), order);
    const second = await client.orders.create({ customer_id: customer, items: [{ product_id: a.id, quantity: 1 }], shipping_address: ADDRESS });
    const page = await client.orders.list({ customer_id: customer, limit: 1 });
    assert.deepEqual(page.data.map((o) => o.id), [second.id]); // newest first
    assert.equal(page.pagination.total, 2);
    const ids = [];
    for await (const o of client.orders.listAll({ customer_id: customer }, { pageSize: 1 })) ids.push(o.id);
    assert.deepEqual(ids, [second.id, order.id]);
    const pending = await client.orders.list({ customer_id: customer, status: "pending" });
    assert.equal(pending.pagination.total, 2);

    const canceled = await client.orders.cancel(order.id);
    assert.equal(canceled.status, "canceled");
    assert.ok(canceled.canceled_at);
    assert.equal((await client.products.get(a.id)).inventory_count, stockBefore - 1);
    const before = requests;
    await assert.rejects(client.orders.cancel(order.id), (error) => {
      assert.ok(error instanceof ConflictError);
      assert.equal(error.statusCode, 409);
      return true;
    });
    assert.equal(requests - before, 1, "an illegal transition is not retried");
  });

  test("listAll sees each order and event once while orders arrive", async () => {
    const [, , c] = await books();
    const customer = `cus_arrivals_${Date.now()}`;
    const orderNow = async () =>
      (await client.orders.create({ customer_id: customer, items: [{ product_id: c.id, quantity: 1 }], shipping_address: ADDRESS })).id;
    const placed = [];
    for (let i = 0; i < 5; i++) placed.push(await orderNow());
    const since = (await client.orders.get(placed[0])).created_at;

    const seen = [];
    for await (const o of client.orders.listAll({ customer_id: customer }, { pageSize: 2 })) {
      seen.push(o.id);
      await orderNow(); // a newer order at each step: it would shift offsets, never the cursor
    }
    assert.deepEqual(seen, placed.toReversed());

    const mine = { created_gte: new Date(since), type: "order.created" }; // this test's events on
    const existing = (await client.events.list({ ...mine, limit: 100 })).data.map((e) => e.id);
    assert.equal(existing.length, 10);
    const seenEvents = [];
    for await (const e of client.events.listAll(mine, { pageSize: 3 })) {
      seenEvents.push(e.id);
      await orderNow();
    }
    assert.deepEqual(seenEvents, existing);

    const after = await client.orders.list({ customer_id: customer, starting_after: placed[1] });
    assert.deepEqual(after.data.map((o) => o.id), [placed[0]]);
    await assert.rejects(client.orders.list({ starting_after: "ord_unknown" }), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.details, "starting_after");
      return true;
    });
    await assert.rejects(client.events.list({ created_gte: "yesterday" }), (error) => {
      assert.ok(error instanceof InvalidRequestError);
      assert.equal(error.details, "created_gte");
      return true;
    });
  });

  test("fulfill: with the admin key, and (sandbox) by the owning client", async () => {
    const [a] = await books();
    const one = await client.orders.create({ customer_id: "cus_fulfil", items: [{ product_id: a.id, quantity: 1 }], shipping_address: ADDRESS });
    const fulfilled = await admin.orders.fulfill(one.id);
    assert.equal(fulfilled.status, "fulfilled");
    assert.ok(fulfilled.fulfilled_at);
    await assert.rejects(client.orders.cancel(one.id), ConflictError);
    const two = await client.orders.create({ customer_id: "cus_fulfil", items: [{ product_id: a.id, quantity: 1 }], shipping_address: ADDRESS });
    assert.equal((await client.orders.fulfill(two.id)).status, "fulfilled");
    assert.equal(two.tracking, null);
  });

  test("fulfill with tracking: on the order, validated naming the field", async () => {
    const [a] = await books();
    const one = await client.orders.create({ customer_id: "cus_track", items: [{ product_id: a.id, quantity: 1 }], shipping_address: ADDRESS });
    await assert.rejects(
      admin.orders.fulfill(one.id, { tracking: { carrier: "UPS", number: "1Z", url: "http://track.example/1Z" } }),
      (error) => {
        assert.ok(error instanceof ValidationFailedError);
        assert.equal(error.details, "tracking.url");
        return true;
      },
    );
    const tracking = { carrier: "UPS", number: "1Z999AA1", url: "https://track.example/1Z999AA1" };
    const fulfilled = await admin.orders.fulfill(one.id, { tracking });
    assert.deepEqual(fulfilled.tracking, tracking);
    assert.deepEqual((await client.orders.get(one.id)).tracking, tracking);
  });

  test("not enough stock is a ConflictError naming the line, sent once", async () => {
    const [a] = await books();
    const before = requests;
    await assert.rejects(
      client.orders.create({ customer_id: "cus_1", items: [{ product_id: a.id, quantity: 10_000 }], shipping_address: ADDRESS }),
      (error) => {
        assert.ok(error instanceof ConflictError);
        assert.equal(error.details, "items[0].quantity");
        return true;
      },
    );
    assert.equal(requests - before, 1);
  });

  test("validation errors name the parameter", async () => {
    const [a] = await books();
    const cases = [
      [{ customer_id: "cus_1", items: [{ product_id: a.id, quantity: 0 }], shipping_address: ADDRESS }, "items[0].quantity"],
      [{ customer_id: "cus_1", items: [{ product_id: a.id, quantity: 1 }], shipping_address: { ...ADDRESS, country: "XX" } }, "shipping_address.country"],
      [{ customer_id: "", items: [{ product_id: a.id, quantity: 1 }], shipping_address: ADDRESS }, "customer_id"],
      [{ customer_id: "cus_1", items: [], shipping_address: ADDRESS }, "items"],
    ];
    for (const [params, details] of cases) {
      await assert.rejects(client.orders.create(params), (error) => {
        assert.equal(error.constructor, ValidationFailedError, details);
        assert.ok(error instanceof InvalidRequestError);
        assert.equal(error.reason, "validation_failed");
        assert.equal(error.statusCode, 400);
        assert.equal(error.code, "invalid_request");
        assert.equal(error.details, details);
        return true;
      });
    }
    await assert.rejects(client.orders.get("ord_nope"), NotFoundError);
  });

  test("an idempotency key replays the first answer; reused with another request it is IdempotencyError", async () => {
    const [a, b] = await books();
    const key = `checkout-${Date.now()}`;
    const params = { customer_id: "cus_idem", items: [{ product_id: a.id, quantity: 1 }], shipping_address: ADDRESS };
    const first = await client.orders.create(params, { idempotencyKey: key });
    const replay = await client.orders.create(params, { idempotencyKey: key });
    assert.deepEqual(replay, first);
    const page = await client.orders.list({ customer_id: "cus_idem" });
    assert.equal(page.pagination.total, 1);
    await assert.rejects(
      client.orders.create({ ...params, items: [{ product_id: b.id, quantity: 1 }] }, { idempotencyKey: key }),
      (error) => error instanceof IdempotencyError && error.statusCode === 422,
    );
  });
});

describe("e2e: webhook endpoints and events", { skip: SKIP }, () => {
  test("create, list, listAll, get, update, rotateSecret, delete", async () => {
    const created = await client.webhookEndpoints.create({
      url: "http://127.0.0.1:9/hooks",
      events: ["order.created", "order.fulfilled"],
      description: "Shop backend",
    });
    assert.match(created.id, /^we_/);
    assert.match(created.secret, /^whsec_/);
    assert.deepEqual(created.events, ["order.created", "order.fulfilled"]);
    assert.equal(created.enabled, true);

    const got = await client.webhookEndpoints.get(created.id);
    assert.equal(got.secret, undefined, "the secret is shown only on create");
    assert.equal(got.description, "Shop backend");
    const page = await client.webhookEndpoints.list({ limit: 100 });
    assert.ok(page.data.some((e) => e.id === created.id));
    const all = [];
    for await (const e of client.webhookEndpoints.listAll({ pageSize: 1 })) all.push(e.id);
    assert.ok(all.includes(created.id));

    const updated = await client.webhookEndpoints.update(created.id, { url: "http://127.0.0.1:9/v2", events: ["order.canceled"] });
    assert.equal(updated.url, "http://127.0.0.1:9/v2");
    assert.deepEqual(updated.events, ["order.canceled"]);
    assert.equal(updated.description, "Shop backend");
    const cleared = await client.webhookEndpoints.update(created.id, { description: null });
    assert.equal(cleared.description, null);
    const reenabled = await client.webhookEndpoints.update(created.id, { enabled: true });
    assert.equal(reenabled.enabled, true);
    await assert.rejects(
      client.webhookEndpoints.update(created.id, { url: "not a url" }),
      (error) => error instanceof InvalidRequestError && error.details === "url",
    );

    const rotated = await client.webhookEndpoints.rotateSecret(created.id);
    assert.match(rotated.secret, /^whsec_/);
    assert.notEqual(rotated.secret, created.secret);

    assert.equal(await client.webhookEndpoints.delete(created.id), undefined);
    await assert.rejects(client.webhookEndpoints.get(created.id), NotFoundError);
    await assert.rejects(client.webhookEndpoints.delete(created.id), NotFoundError);
  });

  test("events: list by type, listAll, get with deliveries, redeliver", async () => {
    const [a] = await books();
    const order = await client.orders.create({ customer_id: "cus_events", items: [{ product_id: a.id, quantity: 1 }], shipping_address: ADDRESS });
    await client.orders.cancel(order.id);
    const created = [];
    for await (const event of client.events.listAll({ type: "order.created" }, { pageSize: 2 })) created.push(event);
    const mine = created.find((event) => event.data.id === order.id);
    assert.ok(mine, "the order.created event is listed");
    assert.match(mine.id, /^evt_/);
    assert.ok(created.every((event) => event.type === "order.created"));
    const canceledPage = await client.events.list({ type: "order.canceled", limit: 100 });
    const canceled = canceledPage.data.find((event) => event.data.id === order.id);
    assert.equal(canceled.data.status, "canceled");

    const detailed = await client.events.get(mine.id);
    assert.equal(detailed.id, mine.id);
    assert.ok(Array.isArray(detailed.deliveries));
    assert.deepEqual(detailed.data, mine.data);
    const redelivered = await client.events.redeliver(mine.id);
    assert.equal(redelivered.id, mine.id);
    await assert.rejects(client.events.get("evt_nope"), NotFoundError);
  });
});

describe("e2e: connection errors", { skip: SKIP }, () => {
  test("a refused connection is retried, then APIConnectionError", async () => {
    const port = await freePort(); // nothing listens there now
    let attempts = 0;
    const closed = new CommerceClient({
      apiKey: server.clientKey,
      baseUrl: `http://${HOST}:${port}/v1`,
      maxRetries: 2,
      fetch: (...args) => {
        attempts++;
        return fetch(...args);
      },
    });
    const sleeps = [];
    closed._sleep = async (ms) => {
      sleeps.push(ms);
    };
    await assert.rejects(closed.products.list(), (error) => error instanceof APIConnectionError && error.statusCode === null);
    assert.equal(attempts, 3);
    assert.equal(sleeps.length, 2);
  });
});
