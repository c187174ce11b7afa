/**
 * Every error this library throws. Catch {@link CommerceError} to catch them all:
 *
 * ```text
 * CommerceError                          code, reason, message, details, problems,
 * │                                      statusCode, requestId, rateLimit
 * ├── APIConnectionError                 no response: DNS, refused connection, reset, timeout
 * │   └── APITimeoutError                the request timed out
 * ├── APIStatusError                     the API answered 4xx/5xx: statusCode, requestId, body
 * │   ├── InvalidRequestError            400, 405, 413, 415 and any other 4xx not listed below
 * │   │   ├── ValidationFailedError      400 validation_failed: fix the parameter in details
 * │   │   ├── ConflictError              409
 * │   │   │   ├── InsufficientStockError     insufficient_stock: not enough in stock
 * │   │   │   ├── InvalidTransitionError     invalid_transition: the order's status forbids it
 * │   │   │   └── IdempotencyKeyInUseError   idempotency_key_in_use: the first request with
 * │   │   │                                  this Idempotency-Key is still running (retried)
 * │   │   └── IdempotencyError           422
 * │   │       └── IdempotencyKeyReusedError  idempotency_key_reused: the key was used with a
 * │   │                                      different request
 * │   ├── AuthenticationError            401: missing, unknown or revoked key
 * │   │   └── PermissionDeniedError      403: a valid key without the right role
 * │   ├── NotFoundError                  404
 * │   ├── RateLimitError                 429, with retryAfter (seconds)
 * │   │   └── QuotaExceededError         quota_exceeded: the window's requests are spent
 * │   └── ServerError                    5xx
 * └── WebhookVerificationError           verifyWebhook(): unsigned, tampered or stale delivery
 * ```
 *
 * `reason` is the API's stable word for why (`insufficient_stock`, `invalid_transition`, … the
 * table "Reasons" of the API's docs/design.md). A reason this version does not know still sets
 * `reason`, on the class of its status.
 *
 * `problems` lists every problem of the request (`{parameter, reason, message}`): a body with
 * three bad fields gives three, where `details` names only the first.
 *
 * Mistakes in the client's configuration (a missing key, an unknown environment, a key for
 * the other environment) are a `TypeError` thrown by the constructor, before any request.
 */

import type { ErrorDetail, ErrorProblem } from "./generated/schema.js";
import { type RateLimitInfo, rateLimitFromHeaders } from "./rate-limit.js";

/** The API's error codes (`error.code` of an error body). */
export type ErrorCode = ErrorDetail["code"];

/** The API's error reasons (`error.reason` of an error body): each has one status and code. */
export type ErrorReason = ErrorDetail["reason"];

/** One problem of a request (an item of `error.problems`): the parameter at fault as the
 * request spells it (`items[0].quantity`, `status`, `Authorization`), why (a reason), and
 * what to do. */
export interface Problem extends Readonly<Omit<ErrorProblem, "reason">> {
  readonly reason: ErrorReason | (string & {});
}

export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";

export interface CommerceErrorInit {
  code?: string | null;
  reason?: string | null;
  details?: string;
  problems?: readonly Problem[];
  statusCode?: number | null;
  requestId?: string | null;
  rateLimit?: RateLimitInfo | null;
  /** The error response's body: parsed JSON, or its text when it was not JSON. */
  body?: unknown;
  cause?: unknown;
}

/** The root of every error thrown by this library. */
export class CommerceError extends Error {
  /** The API's error code (`invalid_request`, `unauthorized`, `not_found`, `rate_limited`,
   * `server_error`); null when there was no API response. */
  readonly code: ErrorCode | (string & {}) | null;
  /** Why, as a stable word a program can switch on (`insufficient_stock`, …); null when there
   * was no API response, or the server predates reasons. */
  readonly reason: ErrorReason | (string & {}) | null;
  /** Specifics: the offending parameter (`items[0].quantity`), or a server error's request id. */
  readonly details: string;
  /** Every problem of the request, in the order the API found them (the first is the one
   * `details` names); empty when there was no API response, for a server error or a rate
   * limit. */
  readonly problems: readonly Problem[];
  /** The HTTP status, or null when there was no response. */
  readonly statusCode: number | null;
  /** `X-Request-Id` of the response: quote it to the operator. */
  readonly requestId: string | null;
  /** The rate-limit headers of the response, when it had them. */
  readonly rateLimit: RateLimitInfo | null;

  constructor(message: string, init: CommerceErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code ?? null;
    this.reason = init.reason ?? null;
    this.details = init.details ?? "";
    this.problems = init.problems ?? [];
    this.statusCode = init.statusCode ?? null;
    this.requestId = init.requestId ?? null;
    this.rateLimit = init.rateLimit ?? null;
  }

  /** The message with the status, code, details and request id, when known. */
  override toString(): string {
    const facts = (
      [
        ["status", this.statusCode],
        ["code", this.code],
        ["reason", this.reason],
        ["details", this.details || null],
        ["request id", this.requestId],
      ] as const
    )
      .filter(([, value]) => value !== null)
      .map(([name, value]) => `${name} ${value}`);
    const text = facts.length ? `${this.message} (${facts.join(", ")})` : this.message;
    return `${this.name}: ${text}`;
  }
}

/** The API could not be reached, or the connection broke before a response. */
export class APIConnectionError extends CommerceError {}

/** The request timed out (see the client's `timeoutMs`). */
export class APITimeoutError extends APIConnectionError {}

/**
 * The API answered with an error status. `statusCode` is always set; `requestId` is the
 * response's `X-Request-Id`; `body` is the error body as parsed JSON (the API's
 * `{"error": {...}}` envelope), or its text when it was not JSON (a proxy's page, say).
 */
export class APIStatusError extends CommerceError {
  declare readonly statusCode: number;
  readonly body: unknown;

  constructor(message: string, init: CommerceErrorInit = {}) {
    super(message, init);
    this.body = init.body ?? null;
  }
}

/** The request is malformed or not allowed as sent; `details` names the parameter. */
export class InvalidRequestError extends APIStatusError {}

/** 409: the request conflicts with the current state (stock, order status, or a request with
 * the same `Idempotency-Key` still in flight). */
export class ConflictError extends InvalidRequestError {}

/** 422: the `Idempotency-Key` was already used with a different request. */
export class IdempotencyError extends InvalidRequestError {}

/** 400 `validation_failed`: a parameter is missing, invalid or unknown; `details` names it. */
export class ValidationFailedError extends InvalidRequestError {}

/** 409 `insufficient_stock`: an order line wants more than the product has (`details`:
 * `items[i].quantity`). Not retried: retrying will not help until stock returns. */
export class InsufficientStockError extends ConflictError {}

/** 409 `invalid_transition`: the order's status does not allow this (fulfilling a canceled
 * order, canceling one twice). */
export class InvalidTransitionError extends ConflictError {}

/** 409 `idempotency_key_in_use`: a request with the same `Idempotency-Key` is still running.
 * The client retries these itself; this is thrown once its retries are spent. */
export class IdempotencyKeyInUseError extends ConflictError {}

/** 422 `idempotency_key_reused`: the key was used with a different request; use a new key for
 * a new request. */
export class IdempotencyKeyReusedError extends IdempotencyError {}

/** 401 or 403: the key is missing, invalid, revoked, or lacks the role. */
export class AuthenticationError extends APIStatusError {}

/** 403: the key is valid but may not do this (a client key on an admin endpoint). */
export class PermissionDeniedError extends AuthenticationError {}

/** 404: no such resource (or it belongs to another account). */
export class NotFoundError extends APIStatusError {}

/** 429: the account's quota for this window is spent. */
export class RateLimitError extends APIStatusError {
  /** Seconds to wait before retrying (the `Retry-After` header), when given. */
  readonly retryAfter: number | null;

  constructor(message: string, init: CommerceErrorInit & { retryAfter?: number | null } = {}) {
    super(message, init);
    this.retryAfter = init.retryAfter ?? null;
  }
}

/** 429 `quota_exceeded`: the account's requests for this window are spent. */
export class QuotaExceededError extends RateLimitError {}

/** 5xx: something failed on the server's side; `requestId` helps the operator. */
export class ServerError extends APIStatusError {}

/** A webhook delivery is unsigned, its signature does not match, or it is stale. */
export class WebhookVerificationError extends CommerceError {}

type ErrorClass = new (message: string, init?: CommerceErrorInit) => APIStatusError;

function classForStatus(status: number): ErrorClass {
  if (status === 401) return AuthenticationError;
  if (status === 403) return PermissionDeniedError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 422) return IdempotencyError;
  if (status === 429) return RateLimitError;
  if (status >= 500) return ServerError;
  return InvalidRequestError;
}

/** The typed subclass of each reason that has one, with the reason's status (each reason has
 * one); the other reasons get their status's class. */
const CLASS_FOR_REASON: ReadonlyMap<string, readonly [number, ErrorClass]> = new Map<
  ErrorReason,
  readonly [number, ErrorClass]
>([
  ["validation_failed", [400, ValidationFailedError]],
  ["insufficient_stock", [409, InsufficientStockError]],
  ["invalid_transition", [409, InvalidTransitionError]],
  ["idempotency_key_in_use", [409, IdempotencyKeyInUseError]],
  ["idempotency_key_reused", [422, IdempotencyKeyReusedError]],
  ["quota_exceeded", [429, QuotaExceededError]],
]);

/** The reason's subclass when it has one and the status is the reason's, else the status's. */
function classFor(status: number, reason: string | null): ErrorClass {
  const refined = reason === null ? undefined : CLASS_FOR_REASON.get(reason);
  return refined !== undefined && refined[0] === status ? refined[1] : classForStatus(status);
}

export interface ErrorEnvelope {
  code: string | null;
  reason: string | null;
  message: string | null;
  details: string;
  problems: Problem[];
}

const NO_ENVELOPE: ErrorEnvelope = {
  code: null,
  reason: null,
  message: null,
  details: "",
  problems: [],
};

/** The well-formed items of `error.problems` (a server from before problems sends none). */
function readProblems(value: unknown): Problem[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((item: unknown) => {
    if (typeof item !== "object" || item === null) return [];
    const { parameter, reason, message } = item as Record<string, unknown>;
    if (typeof parameter !== "string" || typeof message !== "string") return [];
    return [{ parameter, reason: typeof reason === "string" ? reason : "", message }];
  });
}

/** `{code, reason, message, details, problems}` of an error body; nulls when it is not the
 * API's envelope (a proxy's HTML page, say). */
export function errorEnvelope(body: string): ErrorEnvelope {
  let error: unknown;
  try {
    error = (JSON.parse(body) as { error?: unknown } | null)?.error;
  } catch {
    return { ...NO_ENVELOPE };
  }
  if (typeof error !== "object" || error === null) return { ...NO_ENVELOPE };
  const { code, reason, message, details, problems } = error as Record<string, unknown>;
  return {
    code: typeof code === "string" ? code : null,
    reason: typeof reason === "string" ? reason : null,
    message: typeof message === "string" ? message : null,
    details: typeof details === "string" ? details : "",
    problems: readProblems(problems),
  };
}

/** `Retry-After` in seconds (delta-seconds or an HTTP date), or null. */
export function parseRetryAfter(headers: Headers, nowMs: number = Date.now()): number | null {
  const value = headers.get("retry-after");
  if (value === null || value.trim() === "") return null;
  let seconds = Number(value.trim());
  if (Number.isNaN(seconds)) {
    const date = Date.parse(value);
    if (Number.isNaN(date)) return null;
    seconds = (date - nowMs) / 1000;
  }
  if (!Number.isFinite(seconds)) return null;
  return Math.max(0, seconds);
}

/** A 409 meaning "a request with this Idempotency-Key is still running" (safe to retry), as
 * opposed to out-of-stock or an illegal transition (not retried). Said by its reason; a server
 * from before reasons says it by naming the header in `details`. */
export function isIdempotencyInFlight(status: number, body: string): boolean {
  if (status !== 409) return false;
  const { reason, details } = errorEnvelope(body);
  return reason !== null ? reason === "idempotency_key_in_use" : details === IDEMPOTENCY_KEY_HEADER;
}

/** The error for a non-2xx response whose body was `body`. */
export function errorFromResponse(response: Response, body: string): APIStatusError {
  const { code, reason, message, details, problems } = errorEnvelope(body);
  const status = response.status;
  let parsed: unknown = body;
  try {
    parsed = JSON.parse(body);
  } catch {
    // not JSON: keep the text
  }
  const init: CommerceErrorInit = {
    code,
    reason,
    details,
    problems,
    body: parsed,
    statusCode: status,
    requestId: response.headers.get("x-request-id"),
    rateLimit: rateLimitFromHeaders(response.headers),
  };
  const text = message ?? `The API answered ${status} ${response.statusText}`.trimEnd() + ".";
  const cls = classFor(status, reason);
  if (cls === RateLimitError || cls.prototype instanceof RateLimitError) {
    const limited = cls as typeof RateLimitError;
    return new limited(text, { ...init, retryAfter: parseRetryAfter(response.headers) });
  }
  return new cls(text, init);
}
