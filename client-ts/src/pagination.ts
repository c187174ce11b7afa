/** Offset pagination: one {@link Page}, and walking all of them lazily. */

import type { Pagination } from "./generated/schema.js";

export type { Pagination };

/** The server's largest page; `listAll()` asks for it to make the fewest requests. */
export const MAX_PAGE_SIZE = 100;

/** One page of a list: `data` and `pagination` (as the API sent them). */
export class Page<T> implements Iterable<T> {
  readonly data: T[];
  readonly pagination: Pagination;

  constructor(body: { data: T[]; pagination: Pagination }) {
    this.data = body.data;
    this.pagination = body.pagination;
  }

  /** True when more items remain after this page. */
  get hasMore(): boolean {
    return this.pagination.has_more;
  }

  /** The `offset` of the next page, or null on the last one. */
  get nextOffset(): number | null {
    if (!this.pagination.has_more || this.data.length === 0) return null;
    return this.pagination.offset + this.data.length;
  }

  [Symbol.iterator](): Iterator<T> {
    return this.data[Symbol.iterator]();
  }

  /** `{ data, pagination }`: the page as the API sent it. */
  toJSON(): { data: T[]; pagination: Pagination } {
    return { data: this.data, pagination: this.pagination };
  }
}

export interface ListAllOptions {
  /** Items per request, 1 to 100 (default 100). */
  pageSize?: number;
}

export function pageSizeOf(options: ListAllOptions | undefined): number {
  const size = options?.pageSize ?? MAX_PAGE_SIZE;
  if (!Number.isInteger(size) || size < 1) {
    throw new TypeError(`pageSize must be an integer >= 1, not ${String(size)}.`);
  }
  return size;
}

/** Every item of every page, fetching each page only when the previous one is used up.
 * `fetch(offset)` returns the page at `offset`. */
export async function* iteratePages<T>(fetch: (offset: number) => Promise<Page<T>>): AsyncGenerator<T, void, undefined> {
  let offset: number | null = 0;
  while (offset !== null) {
    const page: Page<T> = await fetch(offset);
    yield* page.data;
    offset = page.nextOffset;
  }
}
