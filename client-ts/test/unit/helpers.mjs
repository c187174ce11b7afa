// Shared by the unit tests: a stubbed `fetch` that answers from a script and records calls.

export const SANDBOX_KEY = "sk_sandbox_test_0123456789";
export const LIVE_KEY = "sk_live_test_0123456789";
export const BASE_URL = "http://api.test/v1";

export const RATE_LIMIT_HEADERS = {
  "x-ratelimit-limit": "1000",
  "x-ratelimit-remaining": "998",
  "x-ratelimit-reset": "1768482000",
};

/** A Response with a JSON body (or none for 204). */
export function json(status, body, headers = {}) {
  const init = {
    status,
    headers: { "content-type": "application/json", "x-request-id": `req_${status}`, ...RATE_LIMIT_HEADERS, ...headers },
  };
  return new Response(status === 204 ? null : JSON.stringify(body), init);
}

export function apiError(status, code, message, details = "", headers = {}) {
  return json(status, { error: { code, message, details } }, headers);
}

/**
 * `fetch` answering each call with the next entry of `script`: a Response, an Error (thrown),
 * or a function `(call) => Response | Promise<Response>`. `calls` records every request.
 */
export function stubFetch(script) {
  const calls = [];
  const queue = [...script];
  const fetch = async (url, init = {}) => {
    const headers = new Headers(init.headers);
    const call = {
      url: new URL(url),
      method: init.method ?? "GET",
      headers,
      body: init.body === undefined ? undefined : JSON.parse(init.body),
      signal: init.signal,
    };
    calls.push(call);
    if (queue.length === 0) throw new Error(`unexpected request ${call.method} ${url}`);
    const next = queue.shift();
    if (next instanceof Error) throw next;
    return typeof next === "function" ? next(call) : next;
  };
  return { fetch, calls, remaining: () => queue.length };
}

/** A client on a stubbed fetch whose pauses are recorded instead of waited. */
export async function stubClient(script, options = {}) {
  const { CommerceClient } = await import("../../dist/index.js");
  const stub = stubFetch(script);
  const client = new CommerceClient({ apiKey: SANDBOX_KEY, baseUrl: BASE_URL, fetch: stub.fetch, ...options });
  const sleeps = [];
  client._sleep = async (ms) => {
    sleeps.push(ms);
  };
  return { client, calls: stub.calls, sleeps, remaining: stub.remaining };
}

/** A network failure as Node's fetch reports it. */
export function networkError(code = "ECONNREFUSED") {
  const cause = Object.assign(new Error(`connect ${code} 127.0.0.1:9`), { code });
  return new TypeError("fetch failed", { cause });
}

export const PAGINATION = (total, limit, offset) => ({
  total,
  limit,
  offset,
  has_more: offset + limit < total,
});

export function product(i) {
  return {
    id: `prod_${i}`,
    name: `Book ${i}`,
    description: "",
    price: 19.99,
    category: "books",
    created_at: "2026-01-15T12:00:00Z",
  };
}

export function order(overrides = {}) {
  return {
    id: "ord_1",
    status: "pending",
    customer_id: "cus_123",
    items: [{ product_id: "prod_1", name: "Book 1", quantity: 2, unit_price: 19.99 }],
    shipping_address: { street: "1 Main St", line2: null, city: "Springfield", state: null, postal_code: "12345", country: "US" },
    total: 39.98,
    currency: "USD",
    created_at: "2026-01-15T12:00:00Z",
    updated_at: "2026-01-15T12:00:00Z",
    fulfilled_at: null,
    canceled_at: null,
    tracking: null,
    ...overrides,
  };
}

export const ORDER_PARAMS = {
  customer_id: "cus_123",
  items: [{ product_id: "prod_1", quantity: 2 }],
  shipping_address: { street: "1 Main St", city: "Springfield", postal_code: "12345", country: "US" },
};
