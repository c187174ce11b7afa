// End to end against a real `commerce-api serve --demo` (see server.mjs): the catalogue's admin
// calls (`products.create` / `update` / `archive`), search and sort, and `categories.list()`.
// A server of its own: resources.test.mjs counts the demo catalogue's products. Each test makes
// products in a category of its own.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { CommerceClient, NotFoundError, PermissionDeniedError, ValidationFailedError } from "../../dist/index.js";
import { SKIP, startServer } from "./server.mjs";

// The server of this tree does not have these yet; they arrive with issue 31 item 2. When it
// does, replace them with SKIP (the tests are written against the documented behaviour).

let server;
let client;
let admin;

before(async () => {
  if (SKIP) return;
  server = await startServer();
  client = new CommerceClient({ apiKey: server.clientKey, environment: "sandbox", baseUrl: server.baseUrl });
  admin = new CommerceClient({ apiKey: server.adminKey, environment: "sandbox", baseUrl: server.baseUrl });
});

after(async () => {
  await server?.stop();
});

const uniqueCategory = () => `e2e-${randomUUID().slice(0, 12)}`;

describe("e2e: products (admin)", { skip: SKIP }, () => {
  test("create, update, archive", async () => {
    const category = uniqueCategory();
    const created = await admin.products.create({ name: "Blue mug", price: 12.5, category, inventory_count: 4 });
    assert.deepEqual(
      [created.name, created.price, created.category, created.description, created.inventory_count],
      ["Blue mug", 12.5, category, "", 4],
    );
    assert.deepEqual(await client.products.get(created.id), created);

    const updated = await admin.products.update(created.id, { price: 9.99, description: "Holds tea." });
    assert.deepEqual([updated.price, updated.description, updated.name], [9.99, "Holds tea.", "Blue mug"]);
    assert.deepEqual((await client.products.list({ category })).data.map((p) => p.id), [created.id]);

    assert.equal(await admin.products.archive(created.id), undefined);
    await assert.rejects(client.products.get(created.id), NotFoundError);
    assert.deepEqual((await client.products.list({ category })).data, []);
  });

  test("a client key cannot change the catalogue", async () => {
    const product = await admin.products.create({ name: "Locked", price: 1, category: uniqueCategory() });
    const denied = (error) => error instanceof PermissionDeniedError && error.reason === "forbidden";
    await assert.rejects(client.products.create({ name: "Nope", price: 1, category: uniqueCategory() }), denied);
    await assert.rejects(client.products.update(product.id, { price: 2 }), denied);
    await assert.rejects(client.products.archive(product.id), denied);
    assert.equal((await client.products.get(product.id)).price, 1);
  });

  test("an invalid product is ValidationFailedError naming the field; an unknown id NotFoundError", async () => {
    await assert.rejects(
      admin.products.create({ name: "Odd", price: 1.005, category: uniqueCategory() }),
      (error) => error instanceof ValidationFailedError && error.details.includes("price"),
    );
    await assert.rejects(admin.products.update("prod_doesnotexist", { name: "x" }), NotFoundError);
  });
});

describe("e2e: categories", { skip: SKIP }, () => {
  test("list counts the live products of each category", async () => {
    const category = uniqueCategory();
    const products = [];
    for (const name of ["P0", "P1", "P2"]) products.push(await admin.products.create({ name, price: 1, category }));
    const count = async () => (await client.categories.list()).find((c) => c.name === category)?.product_count;
    assert.equal(await count(), 3);
    await admin.products.archive(products[0].id);
    assert.equal(await count(), 2);
  });
});

describe("e2e: product search and sort", { skip: SKIP }, () => {
  test("sort orders a category; q finds words case-insensitively", async () => {
    const category = uniqueCategory();
    const word = `zq${randomUUID().slice(0, 8)}`;
    const cheap = await admin.products.create({ name: "Cheap mug", price: 2, category, description: word });
    const dear = await admin.products.create({ name: "Anvil", price: 99.9, category, description: word.toUpperCase() });
    const middle = await admin.products.create({ name: "Bowl", price: 10, category });
    const ids = async (params) => (await client.products.list({ category, ...params })).data.map((p) => p.id);
    assert.deepEqual(await ids({ sort: "price" }), [cheap.id, middle.id, dear.id]);
    assert.deepEqual(await ids({ sort: "-price" }), [dear.id, middle.id, cheap.id]);
    assert.deepEqual(await ids({ sort: "name" }), [dear.id, middle.id, cheap.id]);
    assert.deepEqual(await ids({ sort: "-created_at" }), [middle.id, dear.id, cheap.id]);
    assert.deepEqual(await ids({}), [cheap.id, dear.id, middle.id]);
    const found = [];
    for await (const product of client.products.listAll({ q: word, sort: "price" })) found.push(product.id);
    assert.deepEqual(found, [cheap.id, dear.id]);
  });
});
