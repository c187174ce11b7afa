/**
 * Where a client sends its requests and with which key: the options, else the
 * `COMMERCE_API_KEY` / `COMMERCE_ENVIRONMENT` / `COMMERCE_BASE_URL` environment variables, else
 * the defaults. Every mistake is a `TypeError` from the constructor, before any request. The
 * Python client (`client/src/commerce_client/_config.py`) applies the same rules with the same
 * wording.
 */

import type { Environment } from "./types.js";

/** The hosted service's URLs; a self-hosted one is `baseUrl` or `COMMERCE_BASE_URL`. */
export const BASE_URLS: Readonly<Record<Environment, string>> = Object.freeze({
  production: "https://api.commerce.example/v1",
  sandbox: "https://sandbox.api.commerce.example/v1",
});

/** The prefixes of the secret keys the service issues (client and admin keys). */
export const KEY_PREFIXES: Readonly<Record<Environment, string>> = Object.freeze({
  production: "sk_live_",
  sandbox: "sk_sandbox_",
});

/** The prefixes of publishable keys (catalogue reads only). */
export const PUBLISHABLE_KEY_PREFIXES: Readonly<Record<Environment, string>> = Object.freeze({
  production: "pk_live_",
  sandbox: "pk_sandbox_",
});

export interface ClientConfig {
  apiKey: string;
  environment: Environment;
  baseUrl: string;
}

function processEnv(name: string): string | undefined {
  const value = globalThis.process?.env?.[name];
  return value === "" ? undefined : value; // an empty variable is an unset one
}

/** The environment a key was issued for, judged by its prefix, and its kind's prefixes (secret
 * or publishable); null for a key without a prefix the service issues. */
function keyEnvironment(apiKey: string): [Environment, Readonly<Record<Environment, string>>] | null {
  for (const prefixes of [KEY_PREFIXES, PUBLISHABLE_KEY_PREFIXES]) {
    for (const [environment, prefix] of Object.entries(prefixes) as [Environment, string][]) {
      if (apiKey.startsWith(prefix)) return [environment, prefixes];
    }
  }
  return null;
}

function isEnvironment(value: string): value is Environment {
  return Object.hasOwn(BASE_URLS, value);
}

export function resolveConfig(options: { apiKey?: string; environment?: string; baseUrl?: string }): ClientConfig {
  const apiKey = options.apiKey ?? processEnv("COMMERCE_API_KEY");
  if (typeof apiKey !== "string" || apiKey === "") {
    throw new TypeError("No API key: pass { apiKey } or set the COMMERCE_API_KEY environment variable.");
  }
  const issued = keyEnvironment(apiKey);
  const chosen: string | null = options.environment || processEnv("COMMERCE_ENVIRONMENT") || (issued?.[0] ?? null);
  if (chosen === null) {
    throw new TypeError(
      'No environment: pass { environment: "sandbox" } or "production", or set COMMERCE_ENVIRONMENT ' +
        "(it is also inferred from sk_sandbox_/sk_live_ keys).",
    );
  }
  if (!isEnvironment(chosen)) {
    throw new TypeError(`environment must be "production" or "sandbox", not ${JSON.stringify(chosen)}.`);
  }
  if (issued !== null && issued[0] !== chosen) {
    const [keyEnv, prefixes] = issued;
    throw new TypeError(
      `This API key (${prefixes[keyEnv]}…) is a ${keyEnv} key, but the client is configured for ` +
        `${chosen}. Use a ${prefixes[chosen]}… key, or environment: "${keyEnv}".`,
    );
  }
  const url = (options.baseUrl || processEnv("COMMERCE_BASE_URL") || BASE_URLS[chosen]).replace(/\/+$/, "");
  if (!url.endsWith("/v1")) {
    throw new TypeError(`baseUrl must end with the API version, /v1 (got ${JSON.stringify(url)}).`);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`baseUrl must be an absolute http(s) URL (got ${JSON.stringify(url)}).`);
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw new TypeError(`baseUrl must be an absolute http(s) URL (got ${JSON.stringify(url)}).`);
  }
  return { apiKey, environment: chosen, baseUrl: url };
}
