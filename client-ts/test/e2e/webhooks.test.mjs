// End to end: the real server's dispatcher delivers events to a node:http receiver on
// 127.0.0.1 that checks them with verifyWebhook, as an application would.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { CommerceClient, WebhookVerificationError, isOrderEvent, verifyWebhook } from "../../dist/index.js";
import { ADDRESS, SKIP, startReceiver, startServer, waitFor } from "./server.mjs";

let server;
let receiver;
let client;
let admin;
let secret = null;
let endpoint;
let productId;

before(async () => {
  if (SKIP) return;
  server = await startServer();
  receiver = await startReceiver(verifyWebhook, () => secret);
  client = new CommerceClient({ apiKey: server.clientKey, baseUrl: server.baseUrl });
  admin = new CommerceClient({ apiKey: server.adminKey, baseUrl: server.baseUrl });
  endpoint = await client.webhookEndpoints.create({ url: receiver.url, description: "ts e2e" });
  secret = endpoint.secret;
  productId = (await client.products.list({ limit: 1 })).data[0].id;
});

after(async () => {
  await receiver?.close();
  await server?.stop();
});

function deliveryOf(type, orderId) {
  return () =>
    receiver.deliveries.find((d) => d.event !== null && d.event.type === type && d.event.data.id === orderId);
}

async function newOrder() {
  return client.orders.create({ customer_id: "cus_hooks", items: [{ product_id: productId, quantity: 1 }], shipping_address: ADDRESS });
}

describe("e2e: webhook deliveries", { skip: SKIP }, () => {
  test("order.created and order.fulfilled arrive signed; verifyWebhook returns the typed event", async () => {
    const order = await newOrder();
    const created = await waitFor(deliveryOf("order.created", order.id), { what: "order.created" });
    assert.equal(created.method, "POST");
    assert.equal(created.path, "/webhooks");
    assert.match(created.headers["content-type"], /application\/json/);
    assert.equal(created.headers["webhook-id"], created.event.id);
    assert.ok(isOrderEvent(created.event));
    assert.deepEqual(created.event.data, order);

    await admin.orders.fulfill(order.id);
    const fulfilled = await waitFor(deliveryOf("order.fulfilled", order.id), { what: "order.fulfilled" });
    assert.equal(fulfilled.event.data.status, "fulfilled");
    assert.ok(receiver.deliveries.every((d) => d.error === null), "every delivery verified");

    // The server recorded the receiver's 200.
    const event = await waitFor(
      async () => {
        const e = await client.events.get(created.event.id);
        return e.deliveries[0]?.status === "succeeded" ? e : null;
      },
      { what: "the delivery to be recorded" },
    );
    const delivery = event.deliveries.find((d) => d.endpoint_id === endpoint.id);
    assert.equal(delivery.attempts.at(-1).status_code, 200);
    assert.equal(delivery.next_attempt_at, null);
  });

  test("a real delivery does not verify with another secret, or once tampered", async () => {
    const order = await newOrder();
    const { body, headers } = await waitFor(deliveryOf("order.created", order.id), { what: "order.created" });
    const other = "whsec_" + Buffer.alloc(32, 7).toString("base64");
    await assert.rejects(verifyWebhook(body, headers, other), WebhookVerificationError);
    const tampered = Buffer.from(body.toString("utf8").replace('"status":"pending"', '"status":"fulfilled"'));
    assert.notDeepEqual(tampered, body);
    await assert.rejects(verifyWebhook(tampered, headers, secret), WebhookVerificationError);
  });

  test("redeliver sends the event again with the same webhook-id", async () => {
    const order = await newOrder();
    const first = await waitFor(deliveryOf("order.created", order.id), { what: "order.created" });
    const count = () => receiver.deliveries.filter((d) => d.headers["webhook-id"] === first.event.id).length;
    assert.equal(count(), 1);
    await client.events.redeliver(first.event.id);
    await waitFor(() => count() === 2, { what: "the redelivery" });
  });

  test("after rotateSecret deliveries carry both signatures: old and new secrets verify", async () => {
    const oldSecret = secret;
    const rotated = await client.webhookEndpoints.rotateSecret(endpoint.id);
    secret = rotated.secret;
    const order = await newOrder();
    const delivery = await waitFor(deliveryOf("order.created", order.id), { what: "order.created after rotation" });
    assert.equal(delivery.headers["webhook-signature"].split(" ").length, 2);
    assert.equal((await verifyWebhook(delivery.body, delivery.headers, oldSecret)).id, delivery.event.id);
    assert.equal((await verifyWebhook(delivery.body, delivery.headers, rotated.secret)).id, delivery.event.id);
  });
});
