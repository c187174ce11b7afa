/** `client.products`: the catalogue (read by every key; changed with an admin key). */

import type { CommerceClient, RequestOptions } from "../client.js";
import { type ListAllOptions, Page, iteratePages, pageSizeOf } from "../pagination.js";
import type {
  Product,
  ProductCreateParams,
  ProductListItem,
  ProductListParams,
  ProductUpdateParams,
} from "../types.js";

export class Products {
  readonly #client: CommerceClient;

  constructor(client: CommerceClient) {
    this.#client = client;
  }

  /** One page of active products, oldest first unless `sort` says otherwise (`"price"`,
   * `"-price"`, `"name"`, `"-created_at"`). `q`: words to find in the name or description.
   * `limit` defaults to 20 (max 100). */
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

  /** Add a product to the catalogue (an admin key; `PermissionDeniedError` otherwise).
   * `description` defaults to `""`, `inventory_count` to 0. */
  async create(params: ProductCreateParams, options: RequestOptions = {}): Promise<Product> {
    return this.#client._request("create_product", { body: params, options });
  }

  /** Change the given fields (an admin key); the others keep their value. `inventory_count`
   * sets the stock to that number. */
  async update(id: string, params: ProductUpdateParams, options: RequestOptions = {}): Promise<Product> {
    return this.#client._request("update_product", { pathParams: [id], body: params, options });
  }

  /** Hide a product from the catalogue (an admin key). Orders that include it keep their copy
   * of its name and price. */
  async archive(id: string, options: RequestOptions = {}): Promise<void> {
    await this.#client._request("archive_product", { pathParams: [id], options });
  }
}
