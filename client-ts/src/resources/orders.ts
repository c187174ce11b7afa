/** `client.orders`: place, read, cancel and fulfil orders. */

import type { CommerceClient, RequestOptions } from "../client.js";
import { type ListAllOptions, Page, iterateAfter, pageSizeOf, withTimestamps } from "../pagination.js";
import type { Order, OrderCreateParams, OrderFulfillParams, OrderListParams } from "../types.js";

export class Orders {
  readonly #client: CommerceClient;

  constructor(client: CommerceClient) {
    this.#client = client;
  }

  /**
   * Place an order; its stock is reserved at once (`ConflictError` when there is not enough).
   * Retried safely: one `idempotencyKey` (generated when omitted) serves every retry of this
   * call. Pass your own to make retries across calls or processes safe.
   */
  async create(params: OrderCreateParams, options: RequestOptions = {}): Promise<Order> {
    const body: OrderCreateParams = {
      customer_id: params.customer_id,
      items: params.items.map((item) => ({ ...item })),
      shipping_address: { ...params.shipping_address },
    };
    return this.#client._request("create_order", { body, options });
  }

  async get(id: string, options: RequestOptions = {}): Promise<Order> {
    return this.#client._request("get_order", { pathParams: [id], options });
  }

  /** One page of your orders, newest first. `limit` defaults to 20 (max 100);
   * `starting_after`: the orders after this one (the last id of the page before). */
  async list(params: OrderListParams = {}, options: RequestOptions = {}): Promise<Page<Order>> {
    const query = withTimestamps(params);
    return new Page(await this.#client._request("list_orders", { query, options }));
  }

  /** Every matching order (`for await`), newest first, fetching pages (by cursor) as the
   * iteration reaches them: orders placed meanwhile do not shift them, so each comes once. */
  listAll(
    params: Omit<OrderListParams, "limit" | "offset" | "starting_after"> = {},
    options?: ListAllOptions,
  ): AsyncGenerator<Order, void, undefined> {
    const limit = pageSizeOf(options);
    return iterateAfter((after) => this.list({ ...params, limit, starting_after: after }));
  }

  /** Cancel a pending order and return its stock (`ConflictError` otherwise). */
  async cancel(id: string, options: RequestOptions = {}): Promise<Order> {
    return this.#client._request("cancel_order", { pathParams: [id], options });
  }

  /**
   * Mark a pending order fulfilled: an admin key, or in the sandbox the owning client.
   * `tracking` (`{ carrier, number, url? }`, `url` https) says where the parcel is: it is on the
   * order and in its `order.fulfilled` event. Without it no body is sent, as before.
   */
  async fulfill(id: string, params: OrderFulfillParams = {}, options: RequestOptions = {}): Promise<Order> {
    const body: OrderFulfillParams | undefined = params.tracking ? { tracking: { ...params.tracking } } : undefined;
    return this.#client._request("fulfill_order", { pathParams: [id], body, options });
  }
}
