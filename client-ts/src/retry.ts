/**
 * When to retry a request, and how long to wait first.
 *
 * Retried: connection failures and timeouts, 429, 5xx, and the 409 that means "a request with
 * this `Idempotency-Key` is still in flight" (the first attempt is still running; once it
 * finishes, the retry gets its stored response). Every other 409 (out of stock, illegal status
 * change) and every other 4xx would fail the same way again, so they are thrown at once.
 *
 * A request is retried only when repeating it cannot apply it twice: GET, PATCH, DELETE, and a
 * POST that carries an `Idempotency-Key` (the client gives every POST one, reused across the
 * retries of one call).
 */

import { isIdempotencyInFlight, parseRetryAfter } from "./errors.js";

export const DEFAULT_MAX_RETRIES = 2;
/** Milliseconds before the first retry (before jitter); doubled for each further retry. */
export const INITIAL_RETRY_DELAY_MS = 500;
/** Upper bound of the exponential backoff, in milliseconds. */
export const MAX_RETRY_DELAY_MS = 8_000;
/** Each backoff delay is reduced by a random fraction up to this, so clients that failed
 * together do not retry together. */
export const JITTER = 0.25;
/** A `Retry-After` longer than this (in seconds) is not waited for: the error is thrown at
 * once, with its `retryAfter`, so the caller decides (a spent hourly quota can mean an hour). */
export const MAX_RETRY_AFTER_SECONDS = 60;

// PATCH is not idempotent in general; ours sets fields to given values, so repeating it is.
const REPEATABLE_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"]);

/** Milliseconds to wait before retry number `retriesDone + 1`: exponential, capped, with
 * jitter: within `[base * (1 - JITTER), base]` where `base = min(INITIAL * 2**n, MAX)`. */
export function backoffDelayMs(retriesDone: number, random: () => number = Math.random): number {
  const base = Math.min(INITIAL_RETRY_DELAY_MS * 2 ** retriesDone, MAX_RETRY_DELAY_MS);
  return base * (1 - JITTER * random());
}

export function isRepeatable(method: string, headers: Headers): boolean {
  return REPEATABLE_METHODS.has(method.toUpperCase()) || headers.has("idempotency-key");
}

/** Milliseconds to wait before retrying after a response, or null not to retry it. */
export function delayForResponseMs(
  response: Response,
  body: string,
  retriesDone: number,
  random: () => number = Math.random,
): number | null {
  const status = response.status;
  if (!(status === 429 || status >= 500 || isIdempotencyInFlight(status, body))) return null;
  const retryAfter = parseRetryAfter(response.headers);
  if (retryAfter === null) return backoffDelayMs(retriesDone, random);
  if (retryAfter > MAX_RETRY_AFTER_SECONDS) return null;
  return retryAfter * 1000;
}
