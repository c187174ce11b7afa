/**
 * TypeScript client of the Commerce API.
 *
 * ```ts
 * import { CommerceClient } from "commerce-client";
 *
 * const client = new CommerceClient({ apiKey: "sk_sandbox_…", environment: "sandbox" });
 * for await (const product of client.products.listAll({ category: "books" })) {
 *   console.log(product.name, product.price);
 * }
 * ```
 *
 * See the README for every resource, errors, retries and webhooks.
 */

export { BASE_URLS, KEY_PREFIXES, PUBLISHABLE_KEY_PREFIXES } from "./config.js";
export {
  CommerceClient,
  DEFAULT_TIMEOUT_MS,
  type ClientOptions,
  type RequestOptions,
  type ResponseInfo,
  type WithResponse,
} from "./client.js";
export {
  APIConnectionError,
  APIStatusError,
  APITimeoutError,
  AuthenticationError,
  CommerceError,
  ConflictError,
  IdempotencyError,
  IdempotencyKeyInUseError,
  IdempotencyKeyReusedError,
  InsufficientStockError,
  InvalidRequestError,
  InvalidTransitionError,
  NotFoundError,
  PermissionDeniedError,
  QuotaExceededError,
  RateLimitError,
  ServerError,
  ValidationFailedError,
  WebhookVerificationError,
  type ErrorCode,
  type ErrorReason,
  type Problem,
} from "./errors.js";
export { MAX_PAGE_SIZE, Page, type ListAllOptions, type Pagination } from "./pagination.js";
export type { RateLimitInfo } from "./rate-limit.js";
export {
  DEFAULT_MAX_RETRIES,
  INITIAL_RETRY_DELAY_MS,
  JITTER,
  MAX_RETRY_AFTER_SECONDS,
  MAX_RETRY_DELAY_MS,
} from "./retry.js";
export { isOrderEvent } from "./types.js";
export type {
  Address,
  AuditActor,
  AuditEvent,
  AuditEventListParams,
  AuditTarget,
  Category,
  CategoryList,
  CountryCode,
  DeliveryAttempt,
  DeliveryStatus,
  Environment,
  Event,
  EventDelivery,
  EventListParams,
  EventType,
  EventWithDeliveries,
  Order,
  OrderCreateParams,
  OrderEvent,
  OrderFulfillParams,
  OrderItem,
  OrderItemParam,
  OrderListParams,
  OrderStatus,
  Product,
  ProductCreateParams,
  ProductListItem,
  ProductListParams,
  ProductSort,
  ProductUpdateParams,
  ShippingAddressParam,
  Timestamp,
  Tracking,
  TrackingParam,
  WebhookEndpoint,
  WebhookEndpointCreateParams,
  WebhookEndpointListParams,
  WebhookEndpointUpdateParams,
  WebhookEndpointWithSecret,
} from "./types.js";
export { VERSION } from "./version.js";
export {
  WEBHOOK_SECRET_PREFIX,
  WEBHOOK_TOLERANCE_SECONDS,
  verifyWebhook,
  type VerifyWebhookOptions,
  type WebhookHeaders,
  type WebhookPayload,
} from "./webhooks.js";
/** Every generated type of the OpenAPI document, under its schema name. */
export type * as schema from "./generated/schema.js";
