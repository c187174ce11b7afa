// verifyWebhook: against signatures made by the server's own signer (a fixture), and by a
// Standard Webhooks signature computed here with node:crypto.
//
// The fixture test/fixtures/python-signed-webhooks.json was produced with
// commerce_api.webhooks.signing.signature_header (the server's signer, built on the
// `standardwebhooks` library); the e2e tests verify live deliveries as well. To make it again:
//   ../.venv/bin/python -c 'from datetime import datetime, timezone
//   from commerce_api.webhooks.signing import signature_header as s
//   t = datetime.fromtimestamp(FIXTURE["timestamp"], timezone.utc)
//   print(s([FIXTURE["secret"]], FIXTURE["message_id"], t, FIXTURE["body"]))'
// (with the fixture's values; both secrets for `rotation_signature`).

import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import { WebhookVerificationError, isOrderEvent, verifyWebhook } from "../../dist/index.js";

const FIXTURE = JSON.parse(readFileSync(new URL("../fixtures/python-signed-webhooks.json", import.meta.url), "utf8"));
const AT = new Date(FIXTURE.timestamp * 1000);

function fixtureHeaders(signature = FIXTURE.signature) {
  return {
    "webhook-id": FIXTURE.message_id,
    "webhook-timestamp": String(FIXTURE.timestamp),
    "webhook-signature": signature,
  };
}

function sign(secret, id, timestamp, body) {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  return "v1," + createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64");
}

async function rejectsVerification(promise, pattern) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof WebhookVerificationError, String(error));
    assert.match(error.message, pattern);
    assert.equal(error.statusCode, null);
    return true;
  });
}

describe("verifyWebhook with the server's signatures", () => {
  test("a delivery signed by the Python signer verifies and returns the typed event", async () => {
    const event = await verifyWebhook(FIXTURE.body, fixtureHeaders(), FIXTURE.secret, { now: AT });
    assert.equal(event.id, "evt_9fQ2");
    assert.equal(event.type, "order.created");
    assert.ok(isOrderEvent(event));
    assert.equal(event.data.id, "ord_2bXk7");
    assert.equal(event.data.total, 105.98);
    assert.equal(event.data.items[0].name, "Fluent Python — 2nd ed.");
  });

  test("the raw body may be a string, a Buffer, a Uint8Array or an ArrayBuffer", async () => {
    const buffer = Buffer.from(FIXTURE.body, "utf8");
    const arrayBuffer = buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength);
    for (const payload of [buffer, new Uint8Array(buffer), arrayBuffer]) {
      const event = await verifyWebhook(payload, fixtureHeaders(), FIXTURE.secret, { now: AT });
      assert.equal(event.id, "evt_9fQ2");
    }
  });

  test("headers may be a Headers object, Node's req.headers, a Map, in any case", async () => {
    const headers = fixtureHeaders();
    const upper = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
    for (const form of [new Headers(headers), headers, upper, new Map(Object.entries(headers)), Object.entries(headers)]) {
      const event = await verifyWebhook(FIXTURE.body, form, FIXTURE.secret, { now: AT });
      assert.equal(event.id, "evt_9fQ2");
    }
  });

  test("during a rotation (several signatures) either secret verifies", async () => {
    const headers = fixtureHeaders(FIXTURE.rotation_signature);
    assert.equal((await verifyWebhook(FIXTURE.body, headers, FIXTURE.secret, { now: AT })).id, "evt_9fQ2");
    assert.equal((await verifyWebhook(FIXTURE.body, headers, FIXTURE.rotated_secret, { now: AT })).id, "evt_9fQ2");
    await rejectsVerification(
      verifyWebhook(FIXTURE.body, fixtureHeaders(), FIXTURE.rotated_secret, { now: AT }),
      /No signature matches/,
    );
  });

  test("a changed body, id or timestamp does not verify", async () => {
    const tampered = FIXTURE.body.replace('"quantity":2', '"quantity":3');
    await rejectsVerification(verifyWebhook(tampered, fixtureHeaders(), FIXTURE.secret, { now: AT }), /No signature matches/);
    await rejectsVerification(
      verifyWebhook(FIXTURE.body, { ...fixtureHeaders(), "webhook-id": "evt_other" }, FIXTURE.secret, { now: AT }),
      /No signature matches/,
    );
    await rejectsVerification(
      verifyWebhook(FIXTURE.body, { ...fixtureHeaders(), "webhook-timestamp": String(FIXTURE.timestamp + 1) }, FIXTURE.secret, { now: AT }),
      /No signature matches/,
    );
  });

  test("the timestamp must be within 5 minutes either way", async () => {
    const at = (seconds) => ({ now: new Date((FIXTURE.timestamp + seconds) * 1000) });
    await verifyWebhook(FIXTURE.body, fixtureHeaders(), FIXTURE.secret, at(299));
    await verifyWebhook(FIXTURE.body, fixtureHeaders(), FIXTURE.secret, at(-299));
    await rejectsVerification(verifyWebhook(FIXTURE.body, fixtureHeaders(), FIXTURE.secret, at(301)), /too old/);
    await rejectsVerification(verifyWebhook(FIXTURE.body, fixtureHeaders(), FIXTURE.secret, at(-301)), /future/);
    await verifyWebhook(FIXTURE.body, fixtureHeaders(), FIXTURE.secret, { ...at(600), toleranceSeconds: 601 });
    // And with the real clock: this fixture is long past.
    await rejectsVerification(verifyWebhook(FIXTURE.body, fixtureHeaders(), FIXTURE.secret), /too old/);
  });
});

describe("verifyWebhook", () => {
  const secret = "whsec_" + Buffer.from("a-32-byte-secret-for-ts-tests!!!").toString("base64");
  const body = JSON.stringify({ id: "evt_1", type: "order.fulfilled", created_at: "2026-01-15T12:00:00Z", data: { id: "ord_1", status: "fulfilled" } });

  function fresh(overrides = {}) {
    const timestamp = String(Math.floor(Date.now() / 1000));
    return { "webhook-id": "evt_1", "webhook-timestamp": timestamp, "webhook-signature": sign(secret, "evt_1", timestamp, body), ...overrides };
  }

  test("a fresh Standard Webhooks signature verifies with the real clock", async () => {
    const event = await verifyWebhook(body, fresh(), secret);
    assert.equal(event.type, "order.fulfilled");
  });

  test("a secret without the whsec_ prefix works too", async () => {
    assert.equal((await verifyWebhook(body, fresh(), secret.slice("whsec_".length))).id, "evt_1");
  });

  test("missing headers", async () => {
    for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      const headers = fresh();
      delete headers[name];
      await rejectsVerification(verifyWebhook(body, headers, secret), new RegExp(`Missing \`${name}\``));
    }
    await rejectsVerification(verifyWebhook(body, fresh({ "webhook-signature": "" }), secret), /Missing/);
  });

  test("a timestamp that is not a Unix time", async () => {
    await rejectsVerification(verifyWebhook(body, fresh({ "webhook-timestamp": "2026-01-15T12:00:00Z" }), secret), /not a Unix time/);
  });

  test("other versions and malformed signatures are skipped; a valid one among them passes", async () => {
    const good = fresh()["webhook-signature"];
    const encoded = good.slice(3);
    await rejectsVerification(verifyWebhook(body, fresh({ "webhook-signature": `v2,${encoded}` }), secret), /No signature/);
    await rejectsVerification(verifyWebhook(body, fresh({ "webhook-signature": `v1,${encoded.slice(0, -4)}` }), secret), /No signature/);
    await rejectsVerification(verifyWebhook(body, fresh({ "webhook-signature": "v1,!!!not-base64!!!" }), secret), /No signature/);
    await rejectsVerification(verifyWebhook(body, fresh({ "webhook-signature": encoded }), secret), /No signature/);
    const several = `v1a,${encoded} v1,${Buffer.alloc(32).toString("base64")} ${good}`;
    assert.equal((await verifyWebhook(body, fresh({ "webhook-signature": several }), secret)).id, "evt_1");
  });

  test("a secret that is not a whsec_ secret is a TypeError", async () => {
    await assert.rejects(verifyWebhook(body, fresh(), "whsec_***"), TypeError);
    await assert.rejects(verifyWebhook(body, fresh(), "whsec_"), TypeError);
  });

  function signedFor(other, id = "m") {
    const timestamp = String(Math.floor(Date.now() / 1000));
    return { "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": sign(secret, id, timestamp, other) };
  }

  test("a signed body that is not JSON is refused", async () => {
    for (const other of ["not json", "<html></html>"]) {
      await rejectsVerification(verifyWebhook(other, signedFor(other), secret), /not JSON/);
    }
  });

  test("verification never fails on the event's shape", async () => {
    // A future kind whose data is no order, a known kind whose data is not an order, an
    // envelope with missing fields, a JSON array: each verifies into a generic event.
    const refunded = JSON.stringify({ id: "evt_3", type: "order.refunded", created_at: "2026-01-15T12:00:00Z", data: { id: "ord_1", amount: "5.00" } });
    let event = await verifyWebhook(refunded, signedFor(refunded, "evt_3"), secret);
    assert.deepEqual([event.id, event.type, isOrderEvent(event)], ["evt_3", "order.refunded", false]);
    assert.deepEqual(event.data, { id: "ord_1", amount: "5.00" });

    const thin = JSON.stringify({ id: "evt_4", type: "order.canceled", created_at: "2026-01-15T12:00:00Z", data: { id: "ord_1" } });
    event = await verifyWebhook(thin, signedFor(thin), secret);
    assert.equal(isOrderEvent(event), false);

    const headers = signedFor("[1,2]", "evt_5");
    event = await verifyWebhook("[1,2]", headers, secret);
    assert.deepEqual([event.id, event.type, event.data], ["evt_5", "", {}]);
    assert.equal(event.created_at, new Date(Number(headers["webhook-timestamp"]) * 1000).toISOString());
  });

  test("unknown fields are kept and the order is still an order", async () => {
    const fixture = JSON.parse(FIXTURE.body);
    const extended = JSON.stringify({ ...fixture, api_version: "2027-01-01", data: { ...fixture.data, loyalty_points: 12 } });
    const event = await verifyWebhook(extended, signedFor(extended), secret);
    assert.ok(isOrderEvent(event));
    assert.equal(event.data.loyalty_points, 12);
  });

  test("events of unknown types are returned with their data as sent", async () => {
    const other = JSON.stringify({ id: "evt_2", type: "invoice.paid", created_at: "2026-01-15T12:00:00Z", data: { amount: 3 } });
    const timestamp = String(Math.floor(Date.now() / 1000));
    const headers = { "webhook-id": "evt_2", "webhook-timestamp": timestamp, "webhook-signature": sign(secret, "evt_2", timestamp, other) };
    const event = await verifyWebhook(other, headers, secret);
    assert.equal(isOrderEvent(event), false);
    assert.deepEqual(event.data, { amount: 3 });
  });
});
