/** `client.webhookEndpoints`: register the URLs your account's events are delivered to. */

import type { CommerceClient, RequestOptions } from "../client.js";
import type { WebhookEndpointUpdate } from "../generated/schema.js";
import { type ListAllOptions, Page, iteratePages, pageSizeOf } from "../pagination.js";
import type {
  Timestamp,
  WebhookEndpoint,
  WebhookEndpointCreateParams,
  WebhookEndpointListParams,
  WebhookEndpointUpdateParams,
  WebhookEndpointWithSecret,
} from "../types.js";

export class WebhookEndpoints {
  readonly #client: CommerceClient;

  constructor(client: CommerceClient) {
    this.#client = client;
  }

  /** Register `url` for `events` (every type when omitted or empty). The result's `secret`
   * (`whsec_…`) is shown only now: store it to verify deliveries. */
  async create(params: WebhookEndpointCreateParams, options: RequestOptions = {}): Promise<WebhookEndpointWithSecret> {
    const body: WebhookEndpointCreateParams = { url: params.url };
    if (params.events !== undefined) body.events = [...params.events];
    if (params.description !== undefined && params.description !== null) body.description = params.description;
    return this.#client._request("create_webhook_endpoint", { body, options });
  }

  async list(params: WebhookEndpointListParams = {}, options: RequestOptions = {}): Promise<Page<WebhookEndpoint>> {
    return new Page(await this.#client._request("list_webhook_endpoints", { query: params, options }));
  }

  listAll(options?: ListAllOptions): AsyncGenerator<WebhookEndpoint, void, undefined> {
    const limit = pageSizeOf(options);
    return iteratePages((offset) => this.list({ limit, offset }));
  }

  async get(id: string, options: RequestOptions = {}): Promise<WebhookEndpoint> {
    return this.#client._request("get_webhook_endpoint", { pathParams: [id], options });
  }

  /** Change the given fields; the others keep their value. `enabled: true` re-enables an
   * endpoint the API disabled; `description: null` clears the description. */
  async update(id: string, params: WebhookEndpointUpdateParams, options: RequestOptions = {}): Promise<WebhookEndpoint> {
    const body: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(params)) {
      if (value !== undefined) body[name] = Array.isArray(value) ? [...value] : value;
    }
    // `description: null` is accepted by the server but not documented (see WebhookEndpointUpdateParams).
    return this.#client._request("update_webhook_endpoint", {
      pathParams: [id],
      body: body as WebhookEndpointUpdate,
      options,
    });
  }

  async delete(id: string, options: RequestOptions = {}): Promise<void> {
    await this.#client._request("delete_webhook_endpoint", { pathParams: [id], options });
  }

  /** A new signing secret for the endpoint (returned once). For 24 hours deliveries are signed
   * with both the old and the new secret, so receivers can switch without missing events. */
  async rotateSecret(id: string, options: RequestOptions = {}): Promise<WebhookEndpointWithSecret> {
    return this.#client._request("rotate_webhook_endpoint_secret", {
      pathParams: [id],
      options,
    });
  }

  /** After an outage of your receiver: send again, now, every delivery to this endpoint that
   * failed (given up, or waiting for a retry) for an event created at or after `since` (a `Date`,
   * or RFC 3339 text with its zone); resolves to how many. A disabled endpoint rejects with a
   * `ConflictError` (reason `endpoint_disabled`): re-enable it with `update(id, { enabled: true })`
   * first. */
  async recover(id: string, since: Timestamp, options: RequestOptions = {}): Promise<number> {
    const body = { since: since instanceof Date ? since.toISOString() : since };
    const { recovered } = await this.#client._request("recover_webhook_endpoint", {
      pathParams: [id],
      body,
      options,
    });
    return recovered;
  }
}
