"""API key secrets: environment prefixes, SHA-256 hashes, constant-time comparison."""

from __future__ import annotations

import hashlib
import re

import pytest

from commerce_api.accounts.keys import (
    KEY_PREFIXES,
    MAX_KEY_LENGTH,
    PUBLISHABLE_KEY_PREFIXES,
    generate_key,
    hash_key,
    hashes_match,
    key_environment,
)
from commerce_api.core.ids import KEY_RANDOM_LENGTH
from commerce_api.settings import Environment


@pytest.mark.parametrize(
    ("environment", "prefix"), [("sandbox", "sk_sandbox_"), ("production", "sk_live_")]
)
def test_generate_key_prefix_per_environment(environment: Environment, prefix: str) -> None:
    key = generate_key(environment)
    assert key.prefix == prefix
    assert key.secret.startswith(prefix)
    random_part = key.secret.removeprefix(prefix)
    assert len(random_part) == KEY_RANDOM_LENGTH
    assert re.fullmatch(r"[A-Za-z0-9]+", random_part)
    assert key.last4 == key.secret[-4:]
    assert len(key.secret) <= MAX_KEY_LENGTH
    assert key_environment(key.secret) == environment


@pytest.mark.parametrize("environment", ["sandbox", "production"])
def test_hash_is_sha256_hex_and_never_the_secret(environment: Environment) -> None:
    key = generate_key(environment)
    assert re.fullmatch(r"[0-9a-f]{64}", key.key_hash)
    assert key.key_hash == hashlib.sha256(key.secret.encode()).hexdigest()
    assert key.key_hash == hash_key(key.secret)
    assert key.secret != key.key_hash
    assert key.secret not in key.key_hash


def test_hash_key_known_value() -> None:
    assert hash_key("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_keys_are_unique() -> None:
    keys = [generate_key("sandbox") for _ in range(500)]
    assert len({key.secret for key in keys}) == 500
    assert len({key.key_hash for key in keys}) == 500


def test_hashes_match() -> None:
    secret = generate_key("sandbox").secret
    assert hashes_match(hash_key(secret), hash_key(secret))
    assert not hashes_match(hash_key(secret), hash_key(secret + "x"))
    assert not hashes_match(hash_key(secret), "")
    assert not hashes_match(hash_key(secret), hash_key(secret).upper())


@pytest.mark.parametrize(
    ("secret", "environment"),
    [
        ("sk_sandbox_abc", "sandbox"),
        ("sk_live_abc", "production"),
        ("sk_test_abc", None),
        ("pk_live_abc", "production"),
        ("pk_sandbox_abc", "sandbox"),
        ("pk_test_abc", None),
        ("", None),
        ("sk_", None),
    ],
)
def test_key_environment(secret: str, environment: Environment | None) -> None:
    assert key_environment(secret) == environment


def test_every_environment_has_a_prefix() -> None:
    assert set(KEY_PREFIXES) == {"sandbox", "production"}
    assert set(PUBLISHABLE_KEY_PREFIXES) == {"sandbox", "production"}


@pytest.mark.parametrize(
    ("environment", "prefix"), [("sandbox", "pk_sandbox_"), ("production", "pk_live_")]
)
def test_publishable_keys_have_their_own_prefix(environment: Environment, prefix: str) -> None:
    key = generate_key(environment, publishable=True)
    assert key.prefix == prefix
    assert key.secret.startswith(prefix)
    assert len(key.secret.removeprefix(prefix)) == KEY_RANDOM_LENGTH
    assert len(key.secret) <= MAX_KEY_LENGTH
    assert key_environment(key.secret) == environment
