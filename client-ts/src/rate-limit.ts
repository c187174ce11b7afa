/** The `X-RateLimit-*` headers of a response: the quota, what is left of it, and when it resets. */
export interface RateLimitInfo {
  /** Requests allowed in the current window. */
  readonly limit: number;
  /** Requests left in the current window. */
  readonly remaining: number;
  /** Unix time, in seconds, at which the window resets. */
  readonly reset: number;
}

const INTEGER = /^\s*-?\d+\s*$/;

function integerHeader(headers: Headers, name: string): number | null {
  const value = headers.get(name);
  return value !== null && INTEGER.test(value) ? Number.parseInt(value, 10) : null;
}

/** The three headers, or null when any is missing or not an integer. */
export function rateLimitFromHeaders(headers: Headers): RateLimitInfo | null {
  const limit = integerHeader(headers, "x-ratelimit-limit");
  const remaining = integerHeader(headers, "x-ratelimit-remaining");
  const reset = integerHeader(headers, "x-ratelimit-reset");
  if (limit === null || remaining === null || reset === null) return null;
  return Object.freeze({ limit, remaining, reset });
}
