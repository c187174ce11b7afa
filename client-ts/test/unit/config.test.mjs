import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { inspect } from "node:util";
import { beforeEach, describe, test } from "node:test";

import * as lib from "../../dist/index.js";
import { BASE_URLS, CommerceClient, PUBLISHABLE_KEY_PREFIXES } from "../../dist/index.js";
import { LIVE_KEY, SANDBOX_KEY, stubFetch } from "./helpers.mjs";

const ENV_NAMES = ["COMMERCE_API_KEY", "COMMERCE_ENVIRONMENT", "COMMERCE_BASE_URL"];

beforeEach(() => {
  for (const name of ENV_NAMES) delete process.env[name];
});

describe("package", () => {
  test("dist/index.js exports the client, verifyWebhook and every error class", () => {
    for (const name of [
      "CommerceClient",
      "verifyWebhook",
      "CommerceError",
      "InvalidRequestError",
      "ConflictError",
      "IdempotencyError",
      "AuthenticationError",
      "PermissionDeniedError",
      "NotFoundError",
      "RateLimitError",
      "ServerError",
      "APIConnectionError",
      "APIStatusError",
      "APITimeoutError",
      "WebhookVerificationError",
      "Page",
      "isOrderEvent",
    ]) {
      assert.equal(typeof lib[name], "function", name);
    }
  });

  test("the error tree mirrors the Python client's", () => {
    const parent = (cls) => Object.getPrototypeOf(cls);
    assert.equal(parent(lib.CommerceError), Error);
    assert.equal(parent(lib.APIConnectionError), lib.CommerceError);
    assert.equal(parent(lib.APITimeoutError), lib.APIConnectionError);
    assert.equal(parent(lib.APIStatusError), lib.CommerceError);
    assert.equal(parent(lib.InvalidRequestError), lib.APIStatusError);
    assert.equal(parent(lib.ConflictError), lib.InvalidRequestError);
    assert.equal(parent(lib.IdempotencyError), lib.InvalidRequestError);
    assert.equal(parent(lib.AuthenticationError), lib.APIStatusError);
    assert.equal(parent(lib.PermissionDeniedError), lib.AuthenticationError);
    assert.equal(parent(lib.NotFoundError), lib.APIStatusError);
    assert.equal(parent(lib.RateLimitError), lib.APIStatusError);
    assert.equal(parent(lib.ServerError), lib.APIStatusError);
    assert.equal(parent(lib.WebhookVerificationError), lib.CommerceError);
    const error = new lib.RateLimitError("slow down", { retryAfter: 3, statusCode: 429 });
    assert.equal(error.name, "RateLimitError");
    assert.equal(error.retryAfter, 3);
  });

  test("VERSION is package.json's, and the package has no runtime dependencies", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    assert.equal(lib.VERSION, pkg.version);
    assert.equal(pkg.type, "module");
    assert.equal(pkg.dependencies, undefined);
    for (const version of Object.values(pkg.devDependencies)) assert.match(version, /^\d+\.\d+\.\d+$/);
  });

  test("retry bounds are named constants", () => {
    assert.equal(lib.DEFAULT_MAX_RETRIES, 2);
    assert.equal(lib.INITIAL_RETRY_DELAY_MS, 500);
    assert.equal(lib.MAX_RETRY_DELAY_MS, 8000);
    assert.equal(lib.JITTER, 0.25);
    assert.equal(lib.MAX_RETRY_AFTER_SECONDS, 60);
  });
});

describe("configuration", () => {
  test("base URLs are the Python client's", () => {
    assert.deepEqual({ ...BASE_URLS }, {
      production: "https://api.commerce.example/v1",
      sandbox: "https://sandbox.api.commerce.example/v1",
    });
    assert.equal(new CommerceClient({ apiKey: SANDBOX_KEY, environment: "sandbox" }).baseUrl, BASE_URLS.sandbox);
    assert.equal(new CommerceClient({ apiKey: LIVE_KEY, environment: "production" }).baseUrl, BASE_URLS.production);
  });

  test("the environment is inferred from the key", () => {
    assert.equal(new CommerceClient({ apiKey: SANDBOX_KEY }).environment, "sandbox");
    assert.equal(new CommerceClient({ apiKey: LIVE_KEY }).environment, "production");
  });

  test("a key for the other environment is refused before any request", () => {
    const stub = stubFetch([]);
    assert.throws(
      () => new CommerceClient({ apiKey: LIVE_KEY, environment: "sandbox", fetch: stub.fetch }),
      (error) => error instanceof TypeError && /sk_live_.*production key.*sandbox/.test(error.message),
    );
    assert.throws(
      () => new CommerceClient({ apiKey: SANDBOX_KEY, environment: "production", fetch: stub.fetch }),
      (error) => error instanceof TypeError && /sk_sandbox_.*sandbox key.*production/.test(error.message),
    );
    assert.equal(stub.calls.length, 0);
  });

  test("the mismatch names the key's prefix and the one to use, as the Python client does", () => {
    assert.throws(() => new CommerceClient({ apiKey: LIVE_KEY, environment: "sandbox" }), {
      name: "TypeError",
      message:
        "This API key (sk_live_…) is a production key, but the client is configured for sandbox. " +
        'Use a sk_sandbox_… key, or environment: "production".',
    });
  });

  test("publishable keys tell their environment, and are checked against it too", () => {
    assert.equal(new CommerceClient({ apiKey: "pk_live_0123456789" }).environment, "production");
    assert.equal(new CommerceClient({ apiKey: "pk_sandbox_0123456789" }).baseUrl, BASE_URLS.sandbox);
    assert.equal(PUBLISHABLE_KEY_PREFIXES.sandbox, "pk_sandbox_");
    assert.throws(
      () => new CommerceClient({ apiKey: "pk_live_0123456789", environment: "sandbox" }),
      /^TypeError: This API key \(pk_live_…\) is a production key.*Use a pk_sandbox_… key/,
    );
    assert.throws(
      () => new CommerceClient({ apiKey: "pk_sandbox_0123456789", environment: "production" }),
      /\(pk_sandbox_…\) is a sandbox key.*Use a pk_live_… key/,
    );
  });

  test("COMMERCE_BASE_URL comes before the environment's hosted service", () => {
    process.env.COMMERCE_BASE_URL = "http://localhost:8000/v1";
    const client = new CommerceClient({ apiKey: SANDBOX_KEY, environment: "sandbox" });
    assert.equal(client.baseUrl, "http://localhost:8000/v1");
    process.env.COMMERCE_BASE_URL = "";
    assert.equal(new CommerceClient({ apiKey: SANDBOX_KEY }).baseUrl, BASE_URLS.sandbox);
  });

  test("a mismatch is refused even with a base URL", () => {
    assert.throws(
      () => new CommerceClient({ apiKey: LIVE_KEY, environment: "sandbox", baseUrl: "http://127.0.0.1:1/v1" }),
      TypeError,
    );
  });

  test("unknown environments, missing keys, bad URLs and bad numbers are TypeErrors", () => {
    assert.throws(() => new CommerceClient({ apiKey: SANDBOX_KEY, environment: "staging" }), /environment must be/);
    assert.throws(() => new CommerceClient({}), /No API key/);
    assert.throws(() => new CommerceClient({ apiKey: "" }), /No API key/);
    assert.throws(() => new CommerceClient({ apiKey: "opaque-key" }), /No environment/);
    assert.throws(() => new CommerceClient({ apiKey: SANDBOX_KEY, baseUrl: "http://localhost:8000" }), /\/v1/);
    assert.throws(() => new CommerceClient({ apiKey: SANDBOX_KEY, baseUrl: "ftp://host/v1" }), /http/);
    assert.throws(() => new CommerceClient({ apiKey: SANDBOX_KEY, baseUrl: "not a url/v1" }), /absolute/);
    assert.throws(() => new CommerceClient({ apiKey: SANDBOX_KEY, maxRetries: -1 }), /maxRetries/);
    assert.throws(() => new CommerceClient({ apiKey: SANDBOX_KEY, maxRetries: 1.5 }), /maxRetries/);
    assert.throws(() => new CommerceClient({ apiKey: SANDBOX_KEY, timeoutMs: 0 }), /timeoutMs/);
    assert.throws(() => new CommerceClient({ apiKey: SANDBOX_KEY, timeoutMs: Number.NaN }), /timeoutMs/);
  });

  test("an opaque key works with an explicit environment", () => {
    const client = new CommerceClient({ apiKey: "opaque-key", environment: "production" });
    assert.equal(client.environment, "production");
  });

  test("a trailing slash is dropped from the base URL", () => {
    const client = new CommerceClient({ apiKey: SANDBOX_KEY, baseUrl: "http://127.0.0.1:8000/v1/" });
    assert.equal(client.baseUrl, "http://127.0.0.1:8000/v1");
  });

  test("defaults: 2 retries, 30 s per attempt", () => {
    const client = new CommerceClient({ apiKey: SANDBOX_KEY });
    assert.equal(client.maxRetries, 2);
    assert.equal(client.timeoutMs, 30_000);
    assert.equal(client.lastRateLimit, null);
  });

  test("environment variables fill in omitted options; options win", () => {
    process.env.COMMERCE_API_KEY = LIVE_KEY;
    process.env.COMMERCE_BASE_URL = "http://127.0.0.1:9/v1";
    const client = new CommerceClient();
    assert.equal(client.environment, "production");
    assert.equal(client.baseUrl, "http://127.0.0.1:9/v1");
    process.env.COMMERCE_ENVIRONMENT = "sandbox";
    assert.throws(() => new CommerceClient(), /production key/);
    const explicit = new CommerceClient({ apiKey: SANDBOX_KEY, baseUrl: "http://127.0.0.1:10/v1" });
    assert.equal(explicit.environment, "sandbox");
    assert.equal(explicit.baseUrl, "http://127.0.0.1:10/v1");
  });

  test("the key never shows when the client is printed or serialised", () => {
    const client = new CommerceClient({ apiKey: SANDBOX_KEY });
    assert.doesNotMatch(inspect(client, { showHidden: true, depth: 5 }), /test_0123456789/);
    assert.doesNotMatch(String(client), /test_0123456789/);
    assert.doesNotMatch(JSON.stringify(client), /test_0123456789/);
  });
});
