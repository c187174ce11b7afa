/** Pagination: one {@link Page}, and walking all of them lazily — by offset, or (the
 * newest-first lists: orders, events) by the cursor `starting_after`. */

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

/** Every item of a newest-first list, each page fetched with the cursor when the previous one
 * is used up: `fetch(startingAfter)` returns the page after the item with that id (undefined:
 * the first page). Items created meanwhile never shift the pages: each item comes once. */
export async function* iterateAfter<T extends { id: string }>(
  fetch: (startingAfter: string | undefined) => Promise<Page<T>>,
): AsyncGenerator<T, void, undefined> {
  let startingAfter: string | undefined;
  for (;;) {
    const page: Page<T> = await fetch(startingAfter);
    yield* page.data;
    const last = page.data.at(-1);
    if (!page.hasMore || last === undefined) return;
    startingAfter = last.id;
  }
}

/** A list query with its `Date`s as the API takes them (RFC 3339, `toISOString()`). */
export function withTimestamps<Q extends { created_gte?: Date | string | null; created_lt?: Date | string | null }>(
  params: Q,
): Omit<Q, "created_gte" | "created_lt"> & { created_gte?: string | null; created_lt?: string | null } {
  const text = (value: Date | string | null | undefined) => (value instanceof Date ? value.toISOString() : value);
  return { ...params, created_gte: text(params.created_gte), created_lt: text(params.created_lt) };
}
