/**
 * Verifying webhook deliveries (Standard Webhooks: https://www.standardwebhooks.com/), with
 * Web Crypto (`crypto.subtle`): no dependency, and the same code in Node.js, Deno, Bun, and
 * edge runtimes.
 */

import { WebhookVerificationError } from "./errors.js";
import type { Event } from "./types.js";

/** How far `webhook-timestamp` may be from now, either way, in seconds: older deliveries are
 * refused as replays, and ones this far in the future as forged or from a badly wrong clock. */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

export const WEBHOOK_SECRET_PREFIX = "whsec_";
const SIGNATURE_VERSION = "v1";
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const UNIX_TIME = /^-?\d+$/;

/**
 * The request headers: a `Headers` object (fetch, Deno, Bun, edge runtimes), Node's
 * `req.headers` (`IncomingHttpHeaders`), a plain object or a `Map` (names in any case).
 */
export type WebhookHeaders =
  | Headers
  | Readonly<Record<string, string | readonly string[] | undefined>>
  | ReadonlyMap<string, string>
  | Iterable<readonly [string, string]>;

/** The raw body, exactly as received: before any JSON parsing. */
export type WebhookPayload = string | Uint8Array | ArrayBuffer;

export interface VerifyWebhookOptions {
  /** Seconds `webhook-timestamp` may be away from now (default 300). */
  toleranceSeconds?: number;
  /** The current time (default: now); for tests and replays of stored deliveries. */
  now?: Date;
}

function decodeBase64(text: string): Uint8Array | null {
  if (!BASE64.test(text)) return null;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function secretKey(secret: string): Uint8Array {
  const raw = typeof secret === "string" && secret.startsWith(WEBHOOK_SECRET_PREFIX)
    ? secret.slice(WEBHOOK_SECRET_PREFIX.length)
    : secret;
  const key = typeof raw === "string" ? decodeBase64(raw) : null;
  if (key === null || key.length === 0) {
    throw new TypeError(
      "The webhook secret must be the whsec_… value returned by webhookEndpoints.create() or rotateSecret().",
    );
  }
  return key;
}

function lowerCaseHeaders(headers: WebhookHeaders): Map<string, string> {
  const found = new Map<string, string>();
  const add = (name: string, value: unknown): void => {
    if (value === undefined || value === null) return;
    const text = Array.isArray(value) ? value.join(", ") : String(value);
    found.set(name.toLowerCase(), text);
  };
  if (typeof (headers as Headers).forEach === "function" && typeof (headers as Headers).get === "function") {
    (headers as Headers | ReadonlyMap<string, string>).forEach((value: string, name: string) => add(name, value));
  } else if (Symbol.iterator in Object(headers)) {
    for (const [name, value] of headers as Iterable<readonly [string, string]>) add(name, value);
  } else {
    for (const [name, value] of Object.entries(headers)) add(name, value);
  }
  return found;
}

function header(headers: Map<string, string>, name: string): string {
  const value = headers.get(name);
  if (!value) throw new WebhookVerificationError(`Missing \`${name}\` header: not a signed delivery.`);
  return value;
}

function bytesOf(payload: WebhookPayload): Uint8Array {
  if (typeof payload === "string") return new TextEncoder().encode(payload);
  if (payload instanceof Uint8Array) return payload;
  if (payload instanceof ArrayBuffer) return new Uint8Array(payload);
  throw new TypeError("The webhook payload must be the raw body: a string, Uint8Array/Buffer or ArrayBuffer.");
}

/** Equal lengths are compared in time independent of where they differ. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= (a[i] as number) ^ (b[i] as number);
  return difference === 0;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The event in a verified body, whatever its shape: verification is about the signature and
 * the timestamp. Unknown types, unknown fields and missing ones give an event with the raw
 * `data` ({@link isOrderEvent} is false unless `data` reads as an order); missing envelope
 * fields fall back to the delivery's headers. Only a body that is not JSON is refused.
 */
function asEvent(body: Uint8Array, messageId: string, sentAt: number): Event {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (error) {
    throw new WebhookVerificationError(`The signed body is not JSON (${String(error)}).`, { cause: error });
  }
  const envelope = isObject(parsed) ? parsed : {};
  const data = envelope.data === undefined ? {} : envelope.data;
  return {
    id: typeof envelope.id === "string" ? envelope.id : messageId,
    type: typeof envelope.type === "string" ? envelope.type : "",
    created_at:
      typeof envelope.created_at === "string" ? envelope.created_at : new Date(sentAt * 1000).toISOString(),
    data: isObject(data) ? data : { value: data },
  };
}

/**
 * Check a delivery's signature and age, then return its event.
 *
 * Pass the body exactly as received (before any JSON parsing), the request's headers, and the
 * endpoint's `whsec_…` secret. Rejects with {@link WebhookVerificationError} when a signature
 * header is missing, no signature matches (a changed body, the wrong secret), the timestamp
 * is more than 5 minutes away from now, or the signed body is not JSON — never because of the
 * event's shape: an event of a type this version does not know comes back with its raw `data`
 * (ignore it and answer 2xx); with a `TypeError` when `secret` is not a `whsec_…`
 * secret. Deliveries are retried with the same `webhook-id` (the event's `id`): use it to
 * ignore duplicates.
 */
export async function verifyWebhook(
  payload: WebhookPayload,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): Promise<Event> {
  const key = secretKey(secret);
  const body = bytesOf(payload);
  const found = lowerCaseHeaders(headers);
  const messageId = header(found, "webhook-id");
  const timestamp = header(found, "webhook-timestamp");
  const signatures = header(found, "webhook-signature");

  if (!UNIX_TIME.test(timestamp.trim())) {
    throw new WebhookVerificationError("`webhook-timestamp` is not a Unix time.");
  }
  const tolerance = options.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  const now = (options.now ?? new Date()).getTime() / 1000;
  const age = now - Number.parseInt(timestamp.trim(), 10);
  if (age > tolerance) {
    throw new WebhookVerificationError(`The delivery is too old (${age.toFixed(0)} s): a replay?`);
  }
  if (age < -tolerance) {
    throw new WebhookVerificationError("The delivery's timestamp is too far in the future.");
  }

  const prefix = new TextEncoder().encode(`${messageId}.${timestamp}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix, 0);
  signed.set(body, prefix.length);
  const hmacKey = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const expected = new Uint8Array(await crypto.subtle.sign("HMAC", hmacKey, signed));

  // Several signatures (space-separated) appear while a secret is rotated; any match passes.
  let matched = false;
  for (const candidate of signatures.split(" ")) {
    const comma = candidate.indexOf(",");
    if (comma < 0 || candidate.slice(0, comma) !== SIGNATURE_VERSION) continue;
    const given = decodeBase64(candidate.slice(comma + 1));
    if (given !== null && constantTimeEqual(given, expected)) matched = true; // no early exit
  }
  if (!matched) {
    throw new WebhookVerificationError(
      "No signature matches: the body was changed, or the secret is not this endpoint's.",
    );
  }
  return asEvent(body, messageId, Number.parseInt(timestamp.trim(), 10));
}
