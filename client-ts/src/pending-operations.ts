/**
 * Operations the client sends that the OpenAPI snapshot (`openapi.json`) does not describe yet:
 * `GET /categories` arrives with the server of issue 31 item 2. The client's table of operations
 * is this one under the generated `OPERATIONS`, so once `npm run openapi:update` brings an
 * operation into the generated table the generated entry is the one used (and its types), and
 * its line here can go.
 */

import type { CategoryList } from "./types.js";

export type PendingOperations = {
  /** GET /categories: the catalogue's categories */
  list_categories: {
    method: "GET";
    path: "/categories";
    pathParams: [];
    query: Record<string, never>;
    body: never;
    response: CategoryList;
    status: 200;
    idempotent: false;
  };
};

export const PENDING_OPERATIONS = {
  list_categories: { method: "GET", path: "/categories" },
} as const satisfies { [K in keyof PendingOperations]: Pick<PendingOperations[K], "method" | "path"> };
