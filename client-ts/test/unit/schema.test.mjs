// The types cannot drift from the API unnoticed:
// 1. src/generated/schema.ts is exactly what scripts/generate.mjs makes of openapi.json;
// 2. openapi.json is exactly the document of the server in this repository
//    (create_app().openapi(), through ../.venv/bin/python);
// 3. src/types.ts checks the hand-shaped types against the generated ones when `tsc` builds
//    (npm test builds first).
// Fix a failure with `npm run openapi:update` (refresh the snapshot and regenerate), then
// `npm run build` and adapt src/types.ts or the resources where it no longer compiles.

import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";

import { OUTPUT_PATH, REPO_PYTHON, SNAPSHOT_PATH, generate, liveOpenApiText } from "../../scripts/generate.mjs";
import { OPERATIONS } from "../../dist/generated/schema.js";

const RESOURCES_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "src", "resources");
const REGENERATE = "run `npm run openapi:update` in client-ts/ and rebuild";

describe("OpenAPI drift", () => {
  test("src/generated/schema.ts is generated from openapi.json", () => {
    const expected = generate(readFileSync(SNAPSHOT_PATH, "utf8"));
    assert.ok(readFileSync(OUTPUT_PATH, "utf8") === expected, `src/generated/schema.ts is stale: ${REGENERATE}`);
  });

  test(
    "openapi.json is the live document of the server",
    { skip: existsSync(REPO_PYTHON) ? false : `no ${REPO_PYTHON} (run make install); the pytest suite checks it too` },
    () => {
      const live = JSON.parse(liveOpenApiText());
      const snapshot = JSON.parse(readFileSync(SNAPSHOT_PATH, "utf8"));
      assert.deepStrictEqual(snapshot, live, `client-ts/openapi.json differs from the server's document: ${REGENERATE}`);
    },
  );

  test("every operation the client calls exists with its method and path", () => {
    const used = {
      list_products: ["GET", "/products"],
      get_product: ["GET", "/products/{id}"],
      create_product: ["POST", "/products"],
      update_product: ["PATCH", "/products/{id}"],
      archive_product: ["DELETE", "/products/{id}"],
      create_order: ["POST", "/orders"],
      get_order: ["GET", "/orders/{id}"],
      list_orders: ["GET", "/orders"],
      cancel_order: ["POST", "/orders/{id}/cancel"],
      fulfill_order: ["POST", "/orders/{id}/fulfill"],
      create_webhook_endpoint: ["POST", "/webhook_endpoints"],
      list_webhook_endpoints: ["GET", "/webhook_endpoints"],
      get_webhook_endpoint: ["GET", "/webhook_endpoints/{id}"],
      update_webhook_endpoint: ["PATCH", "/webhook_endpoints/{id}"],
      delete_webhook_endpoint: ["DELETE", "/webhook_endpoints/{id}"],
      rotate_webhook_endpoint_secret: ["POST", "/webhook_endpoints/{id}/rotate_secret"],
      list_events: ["GET", "/events"],
      get_event: ["GET", "/events/{id}"],
      redeliver_event: ["POST", "/events/{id}/redeliver"],
      recover_webhook_endpoint: ["POST", "/webhook_endpoints/{id}/recover"],
      list_audit_events: ["GET", "/audit_events"],
    };
    for (const [id, [method, path]] of Object.entries(used)) {
      assert.deepEqual(OPERATIONS[id], { method, path }, id);
    }
  });

  test("the client covers every operation: each one is sent by a resource", () => {
    const sent = new Set();
    for (const name of readdirSync(RESOURCES_DIR)) {
      const source = readFileSync(join(RESOURCES_DIR, name), "utf8");
      for (const [, id] of source.matchAll(/_request\("([a-z_]+)"/g)) sent.add(id);
    }
    const missing = Object.keys(OPERATIONS).filter((id) => !sent.has(id));
    assert.deepEqual(missing, [], "operations no resource method sends: add them to src/resources/");
    for (const id of sent) {
      assert.ok(Object.hasOwn(OPERATIONS, id), `unknown operation ${id}`);
    }
  });

  test("the generator turns a changed document into changed types", () => {
    const document = JSON.parse(readFileSync(SNAPSHOT_PATH, "utf8"));
    document.components.schemas.Order.properties.livemode = { type: "boolean" };
    document.components.schemas.Order.required.push("livemode");
    const changed = generate(JSON.stringify(document));
    assert.match(changed, /export type Order = \{[^]*?\n  livemode: boolean;\n\};/);
    assert.notEqual(changed, readFileSync(OUTPUT_PATH, "utf8"));
  });
});
