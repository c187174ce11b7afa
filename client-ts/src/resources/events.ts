/** `client.events`: your account's events and the state of their webhook deliveries. */

import type { CommerceClient, RequestOptions } from "../client.js";
import { type ListAllOptions, Page, iteratePages, pageSizeOf } from "../pagination.js";
import type { Event, EventListParams, EventWithDeliveries } from "../types.js";

export class Events {
  readonly #client: CommerceClient;

  constructor(client: CommerceClient) {
    this.#client = client;
  }

  /** One page of events, oldest first; `type` such as `"order.created"`. */
  async list(params: EventListParams = {}, options: RequestOptions = {}): Promise<Page<Event>> {
    return new Page<Event>(await this.#client._request("list_events", { query: params, options }));
  }

  listAll(
    params: Omit<EventListParams, "limit" | "offset"> = {},
    options?: ListAllOptions,
  ): AsyncGenerator<Event, void, undefined> {
    const limit = pageSizeOf(options);
    return iteratePages((offset) => this.list({ ...params, limit, offset }));
  }

  /** One event, with the state of its delivery to each endpoint. */
  async get(id: string, options: RequestOptions = {}): Promise<EventWithDeliveries> {
    return this.#client._request("get_event", { pathParams: [id], options });
  }

  /** Deliver the event again to its endpoints (for example after fixing a receiver). */
  async redeliver(id: string, options: RequestOptions = {}): Promise<EventWithDeliveries> {
    return this.#client._request("redeliver_event", { pathParams: [id], options });
  }
}
