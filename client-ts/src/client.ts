/** `CommerceClient`: configuration, the request loop with retries, and errors. */

import { resolveConfig } from "./config.js";
import { APIConnectionError, APITimeoutError, CommerceError, errorFromResponse } from "./errors.js";
import { OPERATIONS, type Operations } from "./generated/schema.js";
import { type RateLimitInfo, rateLimitFromHeaders } from "./rate-limit.js";
import { Categories } from "./resources/categories.js";
import { AuditEvents } from "./resources/audit-events.js";
import { Events } from "./resources/events.js";
import { Orders } from "./resources/orders.js";
import { Products } from "./resources/products.js";
import { WebhookEndpoints } from "./resources/webhook-endpoints.js";
import { DEFAULT_MAX_RETRIES, backoffDelayMs, delayForResponseMs, isRepeatable } from "./retry.js";
import type { Environment } from "./types.js";
import { VERSION } from "./version.js";

/** Milliseconds, for each attempt of a request. */
export const DEFAULT_TIMEOUT_MS = 30_000;

export interface ClientOptions {
  /** `sk_sandbox_…` or `sk_live_…` (or a publishable `pk_…`); default: the `COMMERCE_API_KEY`
   * environment variable. */
  apiKey?: string;
  /** Default: `COMMERCE_ENVIRONMENT`, else the key's (`sk_live_…` / `pk_live_…` → production,
   * `sk_sandbox_…` / `pk_sandbox_…` → sandbox). A key of the other environment is refused. */
  environment?: Environment;
  /** The server, ending in `/v1` (a self-hosted one: `http://localhost:8000/v1`). Default:
   * `COMMERCE_BASE_URL`, else the environment's hosted service. */
  baseUrl?: string;
  /** Retries after a connection error, a timeout, a 429, a 5xx or an in-flight idempotency
   * key: default 2, so at most 3 attempts. */
  maxRetries?: number;
  /** Milliseconds per attempt (default 30,000). */
  timeoutMs?: number;
  /** A `fetch` implementation (default: the global one), e.g. one with a proxy dispatcher. */
  fetch?: typeof fetch;
}

/** Per-call options: the last argument of every method. */
export interface RequestOptions {
  /** For a POST: sent as `Idempotency-Key`; generated (a random UUID) when omitted, and reused
   * by every retry of the call. Pass your own to make a retry across calls or processes safe. */
  idempotencyKey?: string;
  /** Milliseconds per attempt of this call (default: the client's `timeoutMs`). */
  timeoutMs?: number;
  /** Retries of this call (default: the client's `maxRetries`). */
  maxRetries?: number;
  /** Extra request headers (`Authorization` cannot be replaced). */
  headers?: Record<string, string>;
  /** Called with the response's metadata when the call's answer arrives (its last attempt,
   * success or error); see {@link CommerceClient.withResponse}. */
  onResponse?: (response: ResponseInfo) => void;
}

/** What the API answered to one call (its last attempt, after any retries). */
export interface ResponseInfo {
  status: number;
  headers: Headers;
  /** `X-Request-Id`: quote it to the operator. */
  requestId: string | null;
  rateLimit: RateLimitInfo | null;
  /** How many times the call was retried before this answer. */
  retries: number;
}

/** A call's result (`data`) with its {@link ResponseInfo} (`response`). */
export interface WithResponse<T> {
  data: T;
  response: ResponseInfo;
}

type Query = Record<string, string | number | boolean | null | undefined>;

/** The operations the client sends: the generated ones. */
export type ClientOperations = Operations;
export type ClientOperationId = keyof ClientOperations;
const CLIENT_OPERATIONS: { readonly [K in ClientOperationId]: { readonly method: string; readonly path: string } } =
  OPERATIONS;

/** What {@link CommerceClient._request} takes for operation `K`. */
export type RequestArgs<K extends ClientOperationId> = {
  pathParams?: ClientOperations[K]["pathParams"];
  query?: ClientOperations[K]["query"];
  body?: ClientOperations[K]["body"];
  options?: RequestOptions;
};

function userAgent(): string {
  const node = globalThis.process?.versions?.node;
  return `commerce-client-ts/${VERSION}${node ? ` node/${node}` : ""}`;
}

/** `/orders/{id}/cancel` with each id percent-encoded, so an id can never reach another route. */
function expandPath(template: string, ids: readonly unknown[]): string {
  let index = 0;
  const path = template.replace(/\{[^}]+\}/g, () => {
    const value = ids[index++];
    if (typeof value !== "string" || value === "") {
      throw new TypeError(`expected a non-empty id string, got ${JSON.stringify(value)}`);
    }
    return encodeURIComponent(value);
  });
  if (index !== ids.length) throw new TypeError(`${template} takes ${index} ids, got ${ids.length}`);
  return path;
}

function checkedRetries(maxRetries: number): number {
  if (!Number.isInteger(maxRetries) || maxRetries < 0) {
    throw new TypeError(`maxRetries must be an integer >= 0, not ${String(maxRetries)}.`);
  }
  return maxRetries;
}

function checkedTimeout(timeoutMs: number): number {
  if (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new TypeError(`timeoutMs must be a number of milliseconds > 0, not ${String(timeoutMs)}.`);
  }
  return timeoutMs;
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.name}: ${error.message}${cause}`;
}

/**
 * The Commerce API.
 *
 * ```ts
 * const client = new CommerceClient({ apiKey: "sk_sandbox_…", environment: "sandbox" });
 * for await (const product of client.products.listAll({ category: "books" })) { … }
 * ```
 *
 * Configuration mistakes (no key, an unknown environment, a `baseUrl` that is not an http(s) URL
 * ending in `/v1`, a key for the other environment) throw a `TypeError` here, before any request.
 */
export class CommerceClient {
  readonly environment: Environment;
  readonly baseUrl: string;
  readonly maxRetries: number;
  readonly timeoutMs: number;
  /** `X-RateLimit-*` of the last response received (an error's too), or null before any. */
  lastRateLimit: RateLimitInfo | null = null;

  readonly products: Products;
  readonly categories: Categories;
  readonly orders: Orders;
  readonly webhookEndpoints: WebhookEndpoints;
  readonly events: Events;
  readonly auditEvents: AuditEvents;

  readonly #apiKey: string;
  readonly #fetch: typeof fetch;

  /** The pause between attempts (a seam for tests). @internal */
  _sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  constructor(options: ClientOptions = {}) {
    const { apiKey, environment, baseUrl } = resolveConfig(options);
    const maxRetries = checkedRetries(options.maxRetries ?? DEFAULT_MAX_RETRIES);
    const timeoutMs = checkedTimeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const fetchImpl = options.fetch ?? globalThis.fetch;
    if (typeof fetchImpl !== "function") {
      throw new TypeError("No fetch: use Node.js >= 20, or pass { fetch }.");
    }
    this.#apiKey = apiKey;
    this.#fetch = fetchImpl;
    this.environment = environment;
    this.baseUrl = baseUrl;
    this.maxRetries = maxRetries;
    this.timeoutMs = timeoutMs;
    this.products = new Products(this);
    this.categories = new Categories(this);
    this.orders = new Orders(this);
    this.webhookEndpoints = new WebhookEndpoints(this);
    this.events = new Events(this);
    this.auditEvents = new AuditEvents(this);
  }

  /** Never shows the key. */
  toString(): string {
    return `CommerceClient(environment=${this.environment}, baseUrl=${this.baseUrl})`;
  }

  toJSON(): { environment: Environment; baseUrl: string } {
    return { environment: this.environment, baseUrl: this.baseUrl };
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }

  /**
   * Runs one call and resolves to its result with the response's metadata (status, headers,
   * request id, rate-limit figures), for that call only, even with other calls in flight:
   *
   * ```ts
   * const { data: order, response } = await client.withResponse((options) => client.orders.get(id, options));
   * console.log(response.requestId, response.rateLimit?.remaining);
   * ```
   *
   * Pass the `options` it gives you to the method; add your own per-call options as the second
   * argument (`{ timeoutMs: 2000 }`, say).
   */
  async withResponse<T>(
    call: (options: RequestOptions) => Promise<T>,
    options: RequestOptions = {},
  ): Promise<WithResponse<T>> {
    let captured: ResponseInfo | undefined;
    const data = await call({
      ...options,
      onResponse: (response) => {
        captured = response;
        options.onResponse?.(response);
      },
    });
    if (captured === undefined) {
      throw new TypeError("withResponse() needs a call that passes the given options to a method of this client.");
    }
    return { data, response: captured };
  }

  /**
   * Sends operation `operation` of the API, with retries; resolves to its decoded body.
   * Used by the resources; @internal
   */
  async _request<K extends ClientOperationId>(
    operation: K,
    args: RequestArgs<K> = {},
  ): Promise<ClientOperations[K]["response"]> {
    const { method, path } = CLIENT_OPERATIONS[operation];
    const options = args.options ?? {};
    const maxRetries = checkedRetries(options.maxRetries ?? this.maxRetries);
    const timeoutMs = checkedTimeout(options.timeoutMs ?? this.timeoutMs);
    let url = this.baseUrl + expandPath(path, args.pathParams ?? []);
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries((args.query ?? {}) as Query)) {
      if (value !== undefined && value !== null) query.append(name, String(value));
    }
    if ([...query.keys()].length) url += `?${query.toString()}`;

    const headers = new Headers({ Accept: "application/json", "User-Agent": userAgent(), ...options.headers });
    headers.set("Authorization", `Bearer ${this.#apiKey}`);
    if (method === "POST") {
      // One key per call, reused by every retry of it: what makes retrying a POST safe.
      headers.set("Idempotency-Key", options.idempotencyKey ?? crypto.randomUUID());
    }
    let body: string | undefined;
    if (args.body !== undefined) {
      body = JSON.stringify(args.body);
      headers.set("Content-Type", "application/json");
    }
    const repeatable = isRepeatable(method, headers);

    for (let retriesDone = 0; ; retriesDone++) {
      let response: Response;
      let text: string;
      try {
        response = await this.#fetch(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs) });
        text = await response.text();
      } catch (error) {
        if (!repeatable || retriesDone >= maxRetries) throw connectionError(error, method, url);
        await this._sleep(backoffDelayMs(retriesDone));
        continue;
      }
      const rateLimit = rateLimitFromHeaders(response.headers);
      this.lastRateLimit = rateLimit;
      const delay =
        !response.ok && repeatable && retriesDone < maxRetries ? delayForResponseMs(response, text, retriesDone) : null;
      if (response.ok || delay === null) {
        options.onResponse?.({
          status: response.status,
          headers: response.headers,
          requestId: response.headers.get("x-request-id"),
          rateLimit,
          retries: retriesDone,
        });
        if (response.ok) return decode(response, text) as ClientOperations[K]["response"];
        throw errorFromResponse(response, text);
      }
      await this._sleep(delay);
    }
  }
}

function connectionError(error: unknown, method: string, url: string): APIConnectionError {
  if (isTimeout(error)) {
    return new APITimeoutError(`The request to ${method} ${url} timed out.`, { cause: error });
  }
  return new APIConnectionError(`The request to ${method} ${url} failed (${describe(error)}).`, { cause: error });
}

function decode(response: Response, text: string): unknown {
  if (response.status === 204 || text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CommerceError(`The API answered ${response.status} with a body that is not JSON.`, {
      statusCode: response.status,
      requestId: response.headers.get("x-request-id"),
      cause: error,
    });
  }
}
