// End to end: webhookEndpoints.recover against a real server whose dispatcher retries a failed
// delivery only after an hour. The receiver refuses the first delivery (it does not know the
// secret yet); recover sends it again at once, and a disabled endpoint is refused.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { CommerceClient, ConflictError, verifyWebhook } from "../../dist/index.js";
import { ADDRESS, SKIP, startReceiver, startServer, waitFor } from "./server.mjs";

let server;
let receiver;
let client;
let secret = null; // null: the receiver refuses every delivery (400)

before(async () => {
  if (SKIP) return;
  server = await startServer({ env: { COMMERCE_WEBHOOK_RETRY_SCHEDULE: "3600" } });
  receiver = await startReceiver(verifyWebhook, () => secret);
  client = new CommerceClient({ apiKey: server.clientKey, baseUrl: server.baseUrl });
});

after(async () => {
  await receiver?.close();
  await server?.stop();
});

describe("e2e: webhookEndpoints.recover", { skip: SKIP }, () => {
  test("a refused delivery is sent again at once; a disabled endpoint is a ConflictError", async () => {
    const since = new Date(Date.now() - 1000);
    const endpoint = await client.webhookEndpoints.create({ url: receiver.url });
    const productId = (await client.products.list({ limit: 1 })).data[0].id;
    const order = await client.orders.create({
      customer_id: "cus_recover",
      items: [{ product_id: productId, quantity: 1 }],
      shipping_address: ADDRESS,
    });
    assert.equal(order.version, 1);
    const [event] = (await client.events.list({ order_id: order.id })).data;
    await waitFor(
      async () => (await client.events.get(event.id)).deliveries[0]?.attempts.length === 1,
      { what: "the refused attempt to be recorded" },
    );
    assert.equal(receiver.deliveries.length, 1);
    assert.notEqual(receiver.deliveries[0].error, null);

    secret = endpoint.secret;
    assert.equal(await client.webhookEndpoints.recover(endpoint.id, since), 1);

    const delivered = await waitFor(() => receiver.deliveries.find((d) => d.event !== null), {
      what: "the recovered delivery",
    });
    assert.equal(delivered.event.id, event.id);
    assert.equal(delivered.event.data.version, 1);
    assert.equal(await client.webhookEndpoints.recover(endpoint.id, since.toISOString()), 0);

    await client.webhookEndpoints.update(endpoint.id, { enabled: false });
    await assert.rejects(client.webhookEndpoints.recover(endpoint.id, since), (error) => {
      assert.ok(error instanceof ConflictError);
      assert.equal(error.reason, "endpoint_disabled");
      return true;
    });
    await client.webhookEndpoints.delete(endpoint.id);
  });
});
