"""Identifiers: prefixed, random, URL-safe."""

from __future__ import annotations

import re

import pytest

from commerce_api.core.ids import ID_RANDOM_LENGTH, PREFIXES, looks_like, new_id, random_token

CONTRACT_PREFIXES = ["prod", "ord", "acct", "key", "we", "evt"]


@pytest.mark.parametrize("prefix", CONTRACT_PREFIXES)
def test_new_id_has_the_prefix_and_a_url_safe_random_part(prefix: str) -> None:
    value = new_id(prefix)
    assert value.startswith(f"{prefix}_")
    random_part = value.removeprefix(f"{prefix}_")
    assert len(random_part) == ID_RANDOM_LENGTH
    assert re.fullmatch(r"[A-Za-z0-9]+", random_part)
    assert looks_like(prefix, value)


def test_contract_prefixes_are_known() -> None:
    assert set(CONTRACT_PREFIXES) <= PREFIXES


def test_unknown_prefix_is_refused() -> None:
    with pytest.raises(AssertionError):
        new_id("bogus")


def test_ids_are_unique() -> None:
    values = {new_id("prod") for _ in range(5000)}
    assert len(values) == 5000


def test_random_token_length_and_alphabet() -> None:
    for length in (1, 16, 32, 64):
        token = random_token(length)
        assert len(token) == length
        assert re.fullmatch(r"[A-Za-z0-9]+", token)
    assert len({random_token(32) for _ in range(1000)}) == 1000


@pytest.mark.parametrize(
    ("prefix", "value", "expected"),
    [
        ("prod", "prod_abc123", True),
        ("prod", "prod_" + "a" * 64, True),
        ("prod", "prod_" + "a" * 65, False),
        ("prod", "ord_abc123", False),
        ("ord", "prod_abc123", False),
        ("prod", "prod_", False),
        ("prod", "prod", False),
        ("prod", "", False),
        ("prod", "prod_abc-123", False),
        ("prod", "prod_abc\x00", False),
        ("prod", "prod_abc/../x", False),
        ("prod", "PROD_abc", False),
        ("prod", " prod_abc", False),
        ("prod", "prodx_abc", False),
        ("we", "we_Z9", True),
    ],
)
def test_looks_like(prefix: str, value: str, expected: bool) -> None:
    assert looks_like(prefix, value) is expected


def test_looks_like_refuses_a_trailing_newline() -> None:
    assert looks_like("prod", "prod_abc\n") is False
