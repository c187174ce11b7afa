import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Page } from "../../dist/index.js";
import { PAGINATION, json, order, product, stubClient } from "./helpers.mjs";

function productPages(total, size) {
  const pages = [];
  for (let offset = 0; offset < total || offset === 0; offset += size) {
    const data = [];
    for (let i = offset; i < Math.min(total, offset + size); i++) data.push(product(i));
    pages.push(json(200, { data, pagination: PAGINATION(total, size, offset) }));
    if (total === 0) break;
  }
  return pages;
}

describe("Page", () => {
  test("hasMore, nextOffset, iteration", () => {
    const page = new Page({ data: [1, 2, 3], pagination: { total: 10, limit: 3, offset: 3, has_more: true } });
    assert.equal(page.hasMore, true);
    assert.equal(page.nextOffset, 6);
    assert.deepEqual([...page], [1, 2, 3]);
    assert.deepEqual(JSON.parse(JSON.stringify(page)), { data: [1, 2, 3], pagination: { total: 10, limit: 3, offset: 3, has_more: true } });
    const last = new Page({ data: [], pagination: { total: 10, limit: 3, offset: 30, has_more: false } });
    assert.equal(last.nextOffset, null);
  });
});

describe("listAll", () => {
  test("walks every page in order, 100 per request by default", async () => {
    const { client, calls } = await stubClient(productPages(250, 100));
    const seen = [];
    for await (const item of client.products.listAll({ category: "books" })) seen.push(item.id);
    assert.equal(seen.length, 250);
    assert.deepEqual(seen.slice(0, 2), ["prod_0", "prod_1"]);
    assert.equal(seen.at(-1), "prod_249");
    assert.deepEqual(
      calls.map((c) => c.url.search),
      ["?category=books&limit=100&offset=0", "?category=books&limit=100&offset=100", "?category=books&limit=100&offset=200"],
    );
  });

  test("fetches lazily: breaking after ten items makes one request", async () => {
    const { client, calls, remaining } = await stubClient(productPages(250, 100));
    const firstTen = [];
    for await (const item of client.products.listAll()) {
      firstTen.push(item);
      if (firstTen.length === 10) break;
    }
    assert.equal(firstTen.length, 10);
    assert.equal(calls.length, 1);
    assert.equal(remaining(), 2);
  });

  test("pageSize, filters, an empty list", async () => {
    const pages = [
      json(200, { data: [order({ id: "ord_1" }), order({ id: "ord_2" })], pagination: PAGINATION(3, 2, 0) }),
      json(200, { data: [order({ id: "ord_3" })], pagination: PAGINATION(3, 2, 2) }),
      json(200, { data: [], pagination: PAGINATION(0, 100, 0) }),
    ];
    const { client, calls } = await stubClient(pages);
    const ids = [];
    for await (const o of client.orders.listAll({ customer_id: "cus_1", status: "pending" }, { pageSize: 2 })) ids.push(o.id);
    assert.deepEqual(ids, ["ord_1", "ord_2", "ord_3"]);
    const none = [];
    for await (const e of client.events.listAll({ type: "order.fulfilled" })) none.push(e);
    assert.deepEqual(none, []);
    assert.deepEqual(calls.map((c) => c.url.search), [
      "?customer_id=cus_1&status=pending&limit=2",
      "?customer_id=cus_1&status=pending&limit=2&starting_after=ord_2",
      "?type=order.fulfilled&limit=100",
    ]);
  });

  test("orders and events page by cursor: the last id of each page, never an offset", async () => {
    const pages = [
      json(200, { data: [order({ id: "ord_5" }), order({ id: "ord_4" })], pagination: PAGINATION(5, 2, 0) }),
      json(200, { data: [order({ id: "ord_3" }), order({ id: "ord_2" })], pagination: PAGINATION(5, 2, 2) }),
      json(200, { data: [order({ id: "ord_1" })], pagination: PAGINATION(5, 2, 4) }),
    ];
    const { client, calls } = await stubClient(pages);
    const ids = [];
    for await (const o of client.orders.listAll({}, { pageSize: 2 })) ids.push(o.id);
    assert.deepEqual(ids, ["ord_5", "ord_4", "ord_3", "ord_2", "ord_1"]);
    assert.deepEqual(
      calls.map((c) => c.url.searchParams.get("starting_after")),
      [null, "ord_4", "ord_2"],
    );
    assert.ok(calls.every((c) => !c.url.searchParams.has("offset")));
  });

  test("a time range takes a Date or RFC 3339 text", async () => {
    const { client, calls } = await stubClient([
      json(200, { data: [], pagination: PAGINATION(0, 20, 0) }),
      json(200, { data: [], pagination: PAGINATION(0, 20, 0) }),
    ]);
    await client.events.list({ order_id: "ord_1", created_gte: new Date(Date.UTC(2026, 0, 1, 12)) });
    await client.orders.list({ created_lt: "2026-02-01T00:00:00+01:00", starting_after: "ord_9" });
    assert.deepEqual(
      calls.map((c) => Object.fromEntries(c.url.searchParams)),
      [
        { order_id: "ord_1", created_gte: "2026-01-01T12:00:00.000Z" },
        { created_lt: "2026-02-01T00:00:00+01:00", starting_after: "ord_9" },
      ],
    );
  });

  test("stops when the server clamps the page size", async () => {
    const pages = [
      json(200, { data: [product(0), product(1)], pagination: { total: 3, limit: 2, offset: 0, has_more: true } }),
      json(200, { data: [product(2)], pagination: { total: 3, limit: 2, offset: 2, has_more: false } }),
    ];
    const { client, calls } = await stubClient(pages);
    const ids = [];
    for await (const p of client.products.listAll({}, { pageSize: 500 })) ids.push(p.id);
    assert.deepEqual(ids, ["prod_0", "prod_1", "prod_2"]);
    assert.equal(calls[1].url.searchParams.get("offset"), "2");
  });

  test("webhookEndpoints.listAll pages too; a bad pageSize is a TypeError", async () => {
    const { client, calls } = await stubClient([json(200, { data: [], pagination: PAGINATION(0, 5, 0) })]);
    for await (const _ of client.webhookEndpoints.listAll({ pageSize: 5 })) assert.fail("no endpoints");
    assert.equal(calls[0].url.search, "?limit=5&offset=0");
    assert.throws(() => client.products.listAll({}, { pageSize: 0 }), TypeError);
  });
});
