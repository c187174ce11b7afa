"""Identifiers: prefixed, URL-safe, the creation time then a random part."""

from __future__ import annotations

import re
import time

import pytest

from commerce_api.core.ids import (
    ID_RANDOM_LENGTH,
    ID_TIME_LENGTH,
    PREFIXES,
    looks_like,
    new_id,
    random_token,
    time_digits,
)

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


def test_ids_begin_with_their_creation_time_so_ids_of_one_moment_are_neighbours() -> None:
    # Index locality (core/ids.py): later ids compare greater, bytewise, as the database's
    # B-trees order them; the rest is random.
    earlier = new_id("ord")
    time.sleep(0.002)
    later = [new_id("ord") for _ in range(3)]
    assert all(earlier.encode() < value.encode() for value in later)
    assert len({value[4 : 4 + ID_TIME_LENGTH] for value in later}) <= 2  # one or two ms
    assert len({value[4 + ID_TIME_LENGTH :] for value in later}) == 3


def test_thetime_digits_counts_milliseconds_in_ascii_ordered_base62() -> None:
    assert time_digits(0) == "0" * ID_TIME_LENGTH
    assert time_digits(61) == "0" * (ID_TIME_LENGTH - 1) + "z"
    assert time_digits(62) == "0" * (ID_TIME_LENGTH - 2) + "10"
    stamps = [0, 9, 10, 35, 36, 61, 62, 1_764_000_000_000, 62**ID_TIME_LENGTH - 1]
    assert [time_digits(ms) for ms in stamps] == sorted(time_digits(ms) for ms in stamps)
