/** `client.categories`: the catalogue's categories (a storefront's category menu). */

import type { CommerceClient, RequestOptions } from "../client.js";
import type { Category } from "../types.js";

export class Categories {
  readonly #client: CommerceClient;

  constructor(client: CommerceClient) {
    this.#client = client;
  }

  /** Every category that has an active product, with how many it has (one request: the list
   * is not paginated). */
  async list(options: RequestOptions = {}): Promise<Category[]> {
    const { data } = await this.#client._request("list_categories", { options });
    return data;
  }
}
