"""Where a client sends its requests and with which key: the arguments, else the
``COMMERCE_API_KEY`` / ``COMMERCE_ENVIRONMENT`` / ``COMMERCE_BASE_URL`` environment variables,
else the defaults. Every mistake is a ``ValueError`` when the client is created, before any
request. The TypeScript client (``client-ts/src/config.ts``) applies the same rules with the
same wording."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, cast, get_args
from urllib.parse import urlsplit

from commerce_client._types import Environment

__all__ = ["BASE_URLS", "KEY_PREFIXES", "PUBLISHABLE_KEY_PREFIXES", "ClientConfig", "resolve"]

BASE_URLS: Final[Mapping[Environment, str]] = {
    "production": "https://api.commerce.example/v1",
    "sandbox": "https://sandbox.api.commerce.example/v1",
}
"""The hosted service's URLs; a self-hosted one is ``base_url`` or ``COMMERCE_BASE_URL``."""
KEY_PREFIXES: Final[Mapping[Environment, str]] = {
    "production": "sk_live_",
    "sandbox": "sk_sandbox_",
}
"""The prefixes of the secret keys the service issues (client and admin keys)."""
PUBLISHABLE_KEY_PREFIXES: Final[Mapping[Environment, str]] = {
    "production": "pk_live_",
    "sandbox": "pk_sandbox_",
}
"""The prefixes of publishable keys (catalogue reads only)."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    api_key: str
    environment: Environment
    base_url: str


def _key_environment(api_key: str) -> tuple[Environment, Mapping[Environment, str]] | None:
    """The environment a key was issued for, judged by its prefix, and its kind's prefixes
    (secret or publishable); None for a key without a prefix the service issues."""
    for prefixes in (KEY_PREFIXES, PUBLISHABLE_KEY_PREFIXES):
        for environment, prefix in prefixes.items():
            if api_key.startswith(prefix):
                return environment, prefixes
    return None


def _from_environ(variable: str) -> str | None:
    return os.environ.get(variable) or None  # an empty variable is an unset one


def resolve(api_key: str | None, environment: str | None, base_url: str | None) -> ClientConfig:
    key = api_key if api_key is not None else _from_environ("COMMERCE_API_KEY")
    if not key:
        raise ValueError(
            "No API key: pass api_key=... or set the COMMERCE_API_KEY environment variable."
        )
    issued = _key_environment(key)
    key_environment = issued[0] if issued is not None else None
    chosen = environment or _from_environ("COMMERCE_ENVIRONMENT") or key_environment
    if chosen is None:
        raise ValueError(
            "No environment: pass environment='sandbox' or 'production', or set "
            "COMMERCE_ENVIRONMENT (it is also inferred from sk_sandbox_/sk_live_ keys)."
        )
    if chosen not in BASE_URLS:
        allowed = " or ".join(repr(name) for name in get_args(Environment))
        raise ValueError(f"environment must be {allowed}, not {chosen!r}.")
    chosen_environment = cast(Environment, chosen)  # checked just above
    if issued is not None and issued[0] != chosen_environment:
        key_environment, prefixes = issued
        raise ValueError(
            f"This API key ({prefixes[key_environment]}…) is a {key_environment} key, but the "
            f"client is configured for {chosen}. Use a {prefixes[chosen_environment]}… key, "
            f"or environment={key_environment!r}."
        )
    url = base_url or _from_environ("COMMERCE_BASE_URL") or BASE_URLS[chosen_environment]
    url = url.rstrip("/")
    if not url.endswith("/v1"):
        raise ValueError(f"base_url must end with the API version, /v1 (got {url!r}).")
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError(f"base_url must be an absolute http(s) URL (got {url!r}).")
    return ClientConfig(key, chosen_environment, url)
