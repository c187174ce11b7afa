/** `client.events`: your account's events and the state of their webhook deliveries. */

import type { CommerceClient, RequestOptions } from "../client.js";
import { type ListAllOptions, Page, iterateAfter, pageSizeOf, withTimestamps } from "../pagination.js";
import type { Event, EventListParams, EventWithDeliveries } from "../types.js";

export class Events {
  readonly #client: CommerceClient;

  constructor(client: CommerceClient) {
    this.#client = client;
  }

  /** One page of events, newest first; `type` such as `"order.created"`, `order_id` for one
   * order's events, `starting_after` for the events after that one. */
  async list(params: EventListParams = {}, options: RequestOptions = {}): Promise<Page<Event>> {
    const query = withTimestamps(params);
    return new Page<Event>(await this.#client._request("list_events", { query, options }));
  }

  /** Every matching event (`for await`), newest first, fetching pages (by cursor) as the
   * iteration reaches them: events recorded meanwhile do not shift them, so each comes once. */
  listAll(
    params: Omit<EventListParams, "limit" | "offset" | "starting_after"> = {},
    options?: ListAllOptions,
  ): AsyncGenerator<Event, void, undefined> {
    const limit = pageSizeOf(options);
    return iterateAfter((after) => this.list({ ...params, limit, starting_after: after }));
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
