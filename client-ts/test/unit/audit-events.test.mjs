// client.auditEvents: the audit trail's list, its filters, and paging by cursor (as events').

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { PAGINATION, json, stubClient } from "./helpers.mjs";

function auditEvent(overrides = {}) {
  return {
    id: "aud_1",
    created_at: "2026-11-21T08:12:41.123Z",
    actor: { type: "key", id: "key_1" },
    action: "product.update",
    target: { type: "product", id: "prod_1" },
    changes: { price: [12.5, 10], inventory_count: [3, 0] },
    ...overrides,
  };
}

describe("auditEvents", () => {
  test("list sends the filters and returns the rows", async () => {
    const { client, calls } = await stubClient([json(200, { data: [auditEvent()], pagination: PAGINATION(1, 5, 0) })]);
    const page = await client.auditEvents.list({
      target_id: "prod_1",
      actor_id: "key_1",
      action: "product.update",
      created_gte: new Date(Date.UTC(2026, 10, 1)),
      created_lt: "2026-12-01T00:00:00Z",
      limit: 5,
    });
    assert.equal(calls[0].method, "GET");
    assert.equal(calls[0].url.pathname, "/v1/audit_events");
    assert.deepEqual(Object.fromEntries(calls[0].url.searchParams), {
      target_id: "prod_1",
      actor_id: "key_1",
      action: "product.update",
      created_gte: "2026-11-01T00:00:00.000Z",
      created_lt: "2026-12-01T00:00:00Z",
      limit: "5",
    });
    assert.equal(page.data.length, 1);
    assert.deepEqual(page.data[0].actor, { type: "key", id: "key_1" });
    assert.deepEqual(page.data[0].changes.price, [12.5, 10]);
  });

  test("listAll pages by cursor: the last id of each page, never an offset", async () => {
    const pages = [
      json(200, { data: [auditEvent({ id: "aud_3" }), auditEvent({ id: "aud_2" })], pagination: PAGINATION(3, 2, 0) }),
      json(200, { data: [auditEvent({ id: "aud_1", actor: { type: "system", id: "sweeper" } })], pagination: PAGINATION(3, 2, 2) }),
    ];
    const { client, calls } = await stubClient(pages);
    const rows = [];
    for await (const row of client.auditEvents.listAll({ action: "order.cancel" }, { pageSize: 2 })) rows.push(row);
    assert.deepEqual(rows.map((row) => row.id), ["aud_3", "aud_2", "aud_1"]);
    assert.deepEqual(rows[2].actor, { type: "system", id: "sweeper" });
    assert.deepEqual(
      calls.map((c) => c.url.searchParams.get("starting_after")),
      [null, "aud_2"],
    );
    assert.ok(calls.every((c) => !c.url.searchParams.has("offset") && c.url.searchParams.get("action") === "order.cancel"));
  });
});
