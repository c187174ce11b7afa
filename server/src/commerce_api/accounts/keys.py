"""API key secrets: ``sk_sandbox_…`` / ``sk_live_…`` (secret keys: client and admin) and
``pk_sandbox_…`` / ``pk_live_…`` (publishable keys: catalogue reads only, safe to ship in a
storefront's pages), stored only as a SHA-256 hash. The prefix tells people and programs the
environment and the kind at a glance; what a key may do is its stored role, not its prefix.

A key carries 32 random base62 characters (~190 bits), so a fast hash is the right tool: there
is nothing to brute-force, and lookups by hash stay cheap on every request.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from commerce_api.core.ids import KEY_RANDOM_LENGTH, random_token
from commerce_api.settings import Environment

KEY_PREFIXES: dict[Environment, str] = {"sandbox": "sk_sandbox_", "production": "sk_live_"}
PUBLISHABLE_KEY_PREFIXES: dict[Environment, str] = {
    "sandbox": "pk_sandbox_",
    "production": "pk_live_",
}
MAX_KEY_LENGTH = 100


@dataclass(frozen=True, slots=True)
class NewKey:
    secret: str
    prefix: str
    last4: str
    key_hash: str


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def hashes_match(stored: str, computed: str) -> bool:
    return hmac.compare_digest(stored.encode(), computed.encode())


def generate_key(environment: Environment, *, publishable: bool = False) -> NewKey:
    prefix = (PUBLISHABLE_KEY_PREFIXES if publishable else KEY_PREFIXES)[environment]
    secret = prefix + random_token(KEY_RANDOM_LENGTH)
    return NewKey(secret=secret, prefix=prefix, last4=secret[-4:], key_hash=hash_key(secret))


def key_environment(secret: str) -> Environment | None:
    """The environment a key (secret or publishable) was issued for, judged by its prefix."""
    for prefixes in (KEY_PREFIXES, PUBLISHABLE_KEY_PREFIXES):
        for environment, prefix in prefixes.items():
            if secret.startswith(prefix):
                return environment
    return None
