/** `client.products`: the catalogue (read-only for client keys). */

import type { CommerceClient, RequestOptions } from "../client.js";
import { type ListAllOptions, Page, iteratePages, pageSizeOf } from "../pagination.js";
import type { Product, ProductListItem, ProductListParams } from "../types.js";

export class Products {
  readonly #client: CommerceClient;

  constructor(client: CommerceClient) {
    this.#client = client;
  }

  /** One page of active products, oldest first. `limit` defaults to 20 (max 100). */
  async list(params: ProductListParams = {}, options: RequestOptions = {}): Promise<Page<ProductListItem>> {
    return new Page(await this.#client._request("list_products", { query: params, options }));
  }

  /** Every matching product (`for await`), fetching pages as the iteration reaches them. */
  listAll(
    params: Omit<ProductListParams, "limit" | "offset"> = {},
    options?: ListAllOptions,
  ): AsyncGenerator<ProductListItem, void, undefined> {
    const limit = pageSizeOf(options);
    return iteratePages((offset) => this.list({ ...params, limit, offset }));
  }

  /** One product with its current `inventory_count`; `NotFoundError` if unknown. */
  async get(id: string, options: RequestOptions = {}): Promise<Product> {
    return this.#client._request("get_product", { pathParams: [id], options });
  }
}
