"""``random_token``: random bytes mapped to base62 with ``bytes.translate``, the out-of-range
bytes rejected."""

from __future__ import annotations

import re
import secrets
import string
from collections import Counter

import pytest

from commerce_api.core import ids
from commerce_api.core.ids import random_token

BASE62 = string.ascii_letters + string.digits
BASE62_TOKEN = re.compile(r"[A-Za-z0-9]*")


def test_random_token_has_the_length_and_only_base62_characters() -> None:
    for length in range(1, 101):
        for _ in range(20):
            token = random_token(length)
            assert len(token) == length
            assert BASE62_TOKEN.fullmatch(token), token


def test_random_token_of_length_zero_is_empty() -> None:
    assert random_token(0) == ""


def test_random_tokens_do_not_repeat() -> None:
    tokens = {random_token(24) for _ in range(10_000)}
    assert len(tokens) == 10_000


def test_the_characters_are_uniformly_distributed() -> None:
    """620,000 characters: each of the 62 expected 10,000 times (standard deviation ~99);
    ±15 % (±1,500, 15 standard deviations) cannot fail by chance, but catches a modulo bias
    (bytes mod 62 would favour 8 characters by ~21 %)."""
    counts = Counter("".join(random_token(62_000) for _ in range(10)))
    assert set(counts) == set(BASE62)
    mean = 620_000 / 62
    for character, count in counts.items():
        assert abs(count - mean) <= 0.15 * mean, (character, count)
    # and a loose chi-square bound: 61 degrees of freedom, expected ~61, 200 is p < 1e-15
    chi_square = sum((count - mean) ** 2 / mean for count in counts.values())
    assert chi_square < 200


def test_each_accepted_byte_maps_to_a_character_four_times_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bytes 0..247 map onto the alphabet exactly four times each: no character is favoured."""
    monkeypatch.setattr(secrets, "token_bytes", lambda size: bytes(range(248)))
    token = random_token(248)
    assert token == BASE62 * 4
    assert Counter(token) == dict.fromkeys(BASE62, 4)


def test_rejected_bytes_are_dropped_and_more_are_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes 248..255 are never used; when a draw is mostly rejected, another is taken."""
    draws: list[int] = []

    def token_bytes(size: int) -> bytes:
        draws.append(size)
        if len(draws) == 1:
            return bytes([255, 250, 248, 0, 249, 61]) + bytes([253] * (size - 6))
        return bytes([1, 252, 62] * size)[:size]

    monkeypatch.setattr(secrets, "token_bytes", token_bytes)
    token = random_token(5)
    assert len(draws) >= 2, "a second draw was needed"
    # 0 → 'a', 61 → '9', then from the second draw 1 → 'b', 62 → 'a', 1 → 'b'
    assert token == "a9bab"


def test_new_id_uses_base62_tokens() -> None:
    value = ids.new_id("ord")
    assert re.fullmatch(r"ord_[A-Za-z0-9]{24}", value)
