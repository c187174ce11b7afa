/** `client.auditEvents`: the audit trail, who changed what (admin keys only). */

import type { CommerceClient, RequestOptions } from "../client.js";
import { type ListAllOptions, Page, iterateAfter, pageSizeOf, withTimestamps } from "../pagination.js";
import type { AuditEvent, AuditEventListParams } from "../types.js";

export class AuditEvents {
  readonly #client: CommerceClient;

  constructor(client: CommerceClient) {
    this.#client = client;
  }

  /** One page of the audit trail, newest first: the changes to `target_id`, by `actor_id` (a
   * key's id, `cli` or `sweeper`), of `action` (such as `"order.fulfill"`); `starting_after` for
   * the rows after that one. */
  async list(params: AuditEventListParams = {}, options: RequestOptions = {}): Promise<Page<AuditEvent>> {
    const query = withTimestamps(params);
    return new Page<AuditEvent>(await this.#client._request("list_audit_events", { query, options }));
  }

  /** Every matching row (`for await`), newest first, fetching pages (by cursor) as the
   * iteration reaches them: rows recorded meanwhile do not shift them. */
  listAll(
    params: Omit<AuditEventListParams, "limit" | "offset" | "starting_after"> = {},
    options?: ListAllOptions,
  ): AsyncGenerator<AuditEvent, void, undefined> {
    const limit = pageSizeOf(options);
    return iterateAfter((after) => this.list({ ...params, limit, starting_after: after }));
  }
}
