/**
 * The models the API returns and the shapes it accepts. They are the generated types of
 * `src/generated/schema.ts` (from the OpenAPI snapshot `openapi.json`), under the names of the
 * Python client; the few that the client shapes itself are checked against the generated ones
 * at compile time, at the bottom of this file, so `npm run build` fails when they drift.
 *
 * Fields keep the API's snake_case names. Money is a JSON number (`19.99`); timestamps are
 * ISO 8601 UTC strings (`new Date(order.created_at)`).
 */

import type * as G from "./generated/schema.js";

export type Environment = "production" | "sandbox";

/** A moment for `created_gte` / `created_lt`: a `Date`, or RFC 3339 text with its zone
 * (`"2026-11-21T08:12:41Z"`). */
export type Timestamp = Date | string;

/** A newest-first list's query, its time range taking a {@link Timestamp}. */
type WithTimestamps<Q> = Omit<Q, "created_gte" | "created_lt"> & {
  created_gte?: Timestamp | null;
  created_lt?: Timestamp | null;
};

// --- Products -------------------------------------------------------------------------------

/** A product as listed by `products.list()`; `products.get()` adds stock and `updated_at`. */
export type ProductListItem = G.ProductListItem;
/** One product, with its current stock (`inventory_count`). */
export type Product = G.Product;
/** `products.list({ sort })`: `-` is descending; `created_at` (oldest first) is the default. */
export type ProductSort = "created_at" | "-created_at" | "price" | "-price" | "name";
/** `products.list()`: `category`, `q` (words to find in the name or description), `sort`, and
 * the page. (`q` and `sort` are added here until the OpenAPI snapshot has them, issue 31 item 2;
 * the checks at the bottom compare them with the generated ones once it does.) */
export type ProductListParams = G.Operations["list_products"]["query"] & {
  q?: string | null;
  sort?: ProductSort | null;
};
/** `products.create()` (an admin key): `description` defaults to `""`, `inventory_count` to 0. */
export type ProductCreateParams = G.ProductCreate;
/** `products.update()` (an admin key): the fields to change; omitted fields keep their value. */
export type ProductUpdateParams = G.ProductUpdate;

// --- Categories -----------------------------------------------------------------------------

/** A category with at least one active product (`categories.list()`). */
export interface Category {
  /** What `products.list({ category })` takes. */
  name: string;
  /** Active products in this category. */
  product_count: number;
}
/** The body of `GET /categories`. */
export interface CategoryList {
  data: Category[];
}

// --- Orders ---------------------------------------------------------------------------------

/** An order: `pending`, then `fulfilled` or `canceled`. */
export type Order = G.Order;
export type OrderItem = G.OrderItem;
export type Address = G.Address;
export type OrderStatus = G.Order["status"];
/** One line of `orders.create({ items: [...] })`. */
export type OrderItemParam = G.OrderItemCreate;
/** `orders.create({ shipping_address: {...} })`; `country` is an ISO 3166-1 alpha-2 code. */
export type ShippingAddressParam = G.ShippingAddress;
export type CountryCode = G.ShippingAddress["country"];
export type OrderCreateParams = G.OrderCreate;
/** The parcel's tracking on a fulfilled order (`order.tracking`, null until then). */
export type Tracking = G.Tracking;
/** `orders.fulfill(id, { tracking })`: `carrier` and `number` (1 to 100 characters), `url`
 * optional (https). */
export type TrackingParam = G.TrackingCreate;
/** `orders.fulfill(id, params)`: `tracking` optional. */
export type OrderFulfillParams = G.OrderFulfill;
/** `orders.list()`: newest first; `starting_after` for the page after that order. */
export type OrderListParams = WithTimestamps<G.Operations["list_orders"]["query"]>;

// --- Webhook endpoints ----------------------------------------------------------------------

export type WebhookEndpoint = G.WebhookEndpoint;
/** What `create()` and `rotateSecret()` return: the endpoint and its signing secret
 * (`whsec_…`), shown only this once. Pass it to {@link verifyWebhook}. */
export type WebhookEndpointWithSecret = G.WebhookEndpointWithSecret;
export type WebhookEndpointCreateParams = G.WebhookEndpointCreate;
/**
 * Fields to change; omitted fields keep their value. `description: null` clears the
 * description: the server accepts it, although its OpenAPI document (which drops `null` from
 * every PATCH field) does not say so.
 */
export type WebhookEndpointUpdateParams = Omit<G.WebhookEndpointUpdate, "description"> & {
  description?: G.WebhookEndpointUpdate["description"] | null;
};
export type WebhookEndpointListParams = G.Operations["list_webhook_endpoints"]["query"];

// --- Events ---------------------------------------------------------------------------------

/** The event types: `order.created`, `order.fulfilled`, `order.canceled`. */
export type EventType = NonNullable<G.WebhookEndpointCreate["events"]>[number];

/**
 * An event, as listed and as delivered to your webhook endpoints. `data` is the order for
 * `order.*` types (narrow with {@link isOrderEvent}); a plain object for types this version of
 * the client does not know.
 */
export interface Event {
  /** `evt_…`; also the `webhook-id` of its deliveries (use it to drop duplicates). */
  id: G.Event["id"];
  type: EventType | (string & {});
  created_at: G.Event["created_at"];
  data: Order | Record<string, unknown>;
}

/** An `order.*` event: `data` is the order as it was after the change. */
export interface OrderEvent extends Event {
  type: EventType;
  data: Order;
}

/** The delivery of one event to one endpoint. */
export type EventDelivery = G.Delivery;
export type DeliveryAttempt = G.DeliveryAttempt;
export type DeliveryStatus = G.Delivery["status"];

/** One event with the state of its delivery to each endpoint (`events.get()`). */
export interface EventWithDeliveries extends Event {
  deliveries: EventDelivery[];
}

/** `events.list()`: newest first; `order_id` for one order's events, `starting_after` for the
 * page after that event. */
export type EventListParams = WithTimestamps<G.Operations["list_events"]["query"]>;

// --- Audit trail ----------------------------------------------------------------------------

/** One change: who (`actor`: a key, or the system's `cli` / `sweeper`), what (`action`, such as
 * `order.fulfill`), to what (`target`), and each changed field's `[old, new]` (`changes`). */
export type AuditEvent = G.AuditEvent;
export type AuditActor = G.AuditActor;
export type AuditTarget = G.AuditTarget;
/** `auditEvents.list()`: newest first; filters `target_id`, `actor_id`, `action`, a time range,
 * `starting_after` for the page after that row. */
export type AuditEventListParams = WithTimestamps<G.Operations["list_audit_events"]["query"]>;

const ORDER_EVENT_TYPES: ReadonlySet<string> = new Set<EventType>([
  "order.created",
  "order.fulfilled",
  "order.canceled",
]);

/** True for `order.created`, `order.fulfilled` and `order.canceled` whose `data` reads as an
 * order (an object with a string `id` and `status`): then `event.data` is an {@link Order}. */
export function isOrderEvent<E extends Event>(event: E): event is E & OrderEvent {
  const data = event.data as Record<string, unknown> | null;
  return (
    ORDER_EVENT_TYPES.has(event.type) &&
    typeof data === "object" &&
    data !== null &&
    typeof data.id === "string" &&
    typeof data.status === "string"
  );
}

// --- Compile-time checks against the generated types -----------------------------------------
// Each line fails to compile when the hand-shaped types above and the OpenAPI document part
// ways; then update this file (and the resources) to the new API.

type Equals<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;
type MutuallyAssignable<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** `T[K]`, or `Absent` while `T` has no `K` (for the checks of what the snapshot may not have yet). */
type FieldOr<T, K extends PropertyKey, Absent> = K extends keyof T ? T[K] : Absent;
type GeneratedProductQuery = G.Operations["list_products"]["query"];

/** Every event type the API knows is one `isOrderEvent` knows, and the reverse. */
type _EventTypes = Assert<Equals<EventType, "order.created" | "order.fulfilled" | "order.canceled">>;
type _OrderEventTypes = Assert<Equals<EventType, NonNullable<G.Operations["list_events"]["query"]["type"]>>>;
type _EventKeys = Assert<Equals<keyof Event, keyof G.Event>>;
type _EventShape = Assert<MutuallyAssignable<Event, G.Event>>;
type _EventWithDeliveriesKeys = Assert<Equals<keyof EventWithDeliveries, keyof G.EventWithDeliveries>>;
type _EventWithDeliveriesShape = Assert<MutuallyAssignable<EventWithDeliveries, G.EventWithDeliveries>>;
type _UpdateKeys = Assert<Equals<keyof WebhookEndpointUpdateParams, keyof G.WebhookEndpointUpdate>>;
type _UpdateWider = Assert<[G.WebhookEndpointUpdate] extends [WebhookEndpointUpdateParams] ? true : false>;
/** The request bodies the resources send are the documented ones. */
type _OrderCreateBody = Assert<Equals<OrderCreateParams, G.Operations["create_order"]["body"]>>;
type _OrderFulfillBody = Assert<Equals<OrderFulfillParams | null, G.Operations["fulfill_order"]["body"]>>;
type _EndpointCreateBody = Assert<Equals<WebhookEndpointCreateParams, G.Operations["create_webhook_endpoint"]["body"]>>;
type _EndpointUpdateBody = Assert<Equals<G.WebhookEndpointUpdate, G.Operations["update_webhook_endpoint"]["body"]>>;
/** The responses the resources return are the documented ones. */
type _ProductGet = Assert<Equals<Product, G.Operations["get_product"]["response"]>>;
type _ProductList = Assert<Equals<ProductListItem[], G.Operations["list_products"]["response"]["data"]>>;
type _OrderGet = Assert<Equals<Order, G.Operations["get_order"]["response"]>>;
type _OrderCancel = Assert<Equals<Order, G.Operations["cancel_order"]["response"]>>;
type _OrderFulfill = Assert<Equals<Order, G.Operations["fulfill_order"]["response"]>>;
type _EndpointCreate = Assert<Equals<WebhookEndpointWithSecret, G.Operations["create_webhook_endpoint"]["response"]>>;
type _EndpointRotate = Assert<Equals<WebhookEndpointWithSecret, G.Operations["rotate_webhook_endpoint_secret"]["response"]>>;
type _EndpointGet = Assert<Equals<WebhookEndpoint, G.Operations["get_webhook_endpoint"]["response"]>>;
type _EndpointDelete = Assert<Equals<void, G.Operations["delete_webhook_endpoint"]["response"]>>;
type _EventGet = Assert<MutuallyAssignable<EventWithDeliveries, G.Operations["get_event"]["response"]>>;
type _EventRedeliver = Assert<MutuallyAssignable<EventWithDeliveries, G.Operations["redeliver_event"]["response"]>>;
type _EventList = Assert<MutuallyAssignable<Event[], G.Operations["list_events"]["response"]["data"]>>;
type _AuditEventList = Assert<Equals<AuditEvent[], G.Operations["list_audit_events"]["response"]["data"]>>;
/** The list queries the resources send are the documented ones, `Date`s aside. */
type _OrderListQuery = Assert<Equals<keyof OrderListParams, keyof G.Operations["list_orders"]["query"]>>;
type _EventListQuery = Assert<Equals<keyof EventListParams, keyof G.Operations["list_events"]["query"]>>;
type _AuditEventListQuery = Assert<Equals<keyof AuditEventListParams, keyof G.Operations["list_audit_events"]["query"]>>;
type _ProductCreateBody = Assert<Equals<ProductCreateParams, G.Operations["create_product"]["body"]>>;
type _ProductUpdateBody = Assert<Equals<ProductUpdateParams, G.Operations["update_product"]["body"]>>;
type _ProductCreate = Assert<Equals<Product, G.Operations["create_product"]["response"]>>;
type _ProductUpdate = Assert<Equals<Product, G.Operations["update_product"]["response"]>>;
type _ProductArchive = Assert<Equals<void, G.Operations["archive_product"]["response"]>>;
/** Once the snapshot has `q`, `sort` and `GET /categories` (issue 31 item 2), they are the
 * documented ones; until then these hold trivially. */
type _ProductSearch = Assert<[string] extends [FieldOr<GeneratedProductQuery, "q", string>] ? true : false>;
/** The server takes every order the client offers. */
type _ProductSort = Assert<[ProductSort] extends [FieldOr<GeneratedProductQuery, "sort", ProductSort>] ? true : false>;
type _CategoryList = Assert<
  MutuallyAssignable<FieldOr<FieldOr<G.Operations, "list_categories", { response: CategoryList }>, "response", never>, CategoryList>
>;
/** The delivery status of the Python client. */
type _DeliveryStatus = Assert<Equals<DeliveryStatus, "pending" | "succeeded" | "failed">>;
type _OrderStatus = Assert<Equals<OrderStatus, "pending" | "fulfilled" | "canceled">>;

export type __TypeChecks = [
  _EventTypes, _OrderEventTypes, _EventKeys, _EventShape, _EventWithDeliveriesKeys,
  _EventWithDeliveriesShape, _UpdateKeys, _UpdateWider, _OrderCreateBody, _EndpointCreateBody,
  _EndpointUpdateBody, _OrderFulfillBody, _ProductGet, _ProductList, _OrderGet, _OrderCancel, _OrderFulfill,
  _EndpointCreate, _EndpointRotate, _EndpointGet, _EndpointDelete, _EventGet, _EventRedeliver,
  _EventList, _OrderListQuery, _EventListQuery, _DeliveryStatus, _OrderStatus, _ProductCreateBody,
  _ProductUpdateBody, _ProductCreate, _ProductUpdate, _ProductArchive, _ProductSearch, _ProductSort,
  _CategoryList, _AuditEventList, _AuditEventListQuery,
];
