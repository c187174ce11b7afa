"""Request ids (a per-process random prefix and a counter) and ``random_token`` (random bytes
mapped to base62 with ``bytes.translate``, the out-of-range bytes rejected)."""

from __future__ import annotations

import os
import re
import secrets
import string
from collections import Counter

import pytest

from commerce_api.core import ids
from commerce_api.core.ids import looks_like, new_request_id, random_token

REQUEST_ID = re.compile(r"req_[A-Za-z0-9]{24}")
BASE62 = string.ascii_letters + string.digits
BASE62_TOKEN = re.compile(r"[A-Za-z0-9]*")


def prefix_of(request_id: str) -> str:
    """``req_`` and the 12 random characters: the part drawn once per process."""
    return request_id[: len("req_") + 12]


# --- request ids -------------------------------------------------------------------------------


def test_request_ids_are_unique_and_well_formed_over_100k_calls() -> None:
    values = [new_request_id() for _ in range(100_000)]
    assert len(set(values)) == len(values)
    for value in values:
        assert REQUEST_ID.fullmatch(value), value
    assert looks_like("req", values[0])
    assert looks_like("req", values[-1])
    assert not looks_like("ord", values[0])


def test_request_ids_of_one_process_share_a_prefix_and_count_up() -> None:
    first, second, third = new_request_id(), new_request_id(), new_request_id()
    assert prefix_of(first) == prefix_of(second) == prefix_of(third)
    counters = [int(value[len(prefix_of(value)) :], 16) for value in (first, second, third)]
    assert counters[1] == counters[0] + 1
    assert counters[2] == counters[1] + 1


def test_after_a_fork_the_prefix_is_drawn_again() -> None:
    """A real fork: the child's ids get a prefix of their own and count from one; the
    parent's go on as before."""
    parent = new_request_id()
    child = _ids_of_a_forked_child(3)
    assert prefix_of(child[0]) != prefix_of(parent), "the child must not reuse the parent's"
    assert {prefix_of(value) for value in child} == {prefix_of(child[0])}
    assert child[0].endswith(f"{1:012x}"), "the child's counter starts again"
    assert all(REQUEST_ID.fullmatch(value) for value in child)
    assert parent not in child

    # A second child gets yet another prefix; the parent keeps its own.
    second = _ids_of_a_forked_child(1)
    assert prefix_of(second[0]) not in {prefix_of(parent), prefix_of(child[0])}
    again = new_request_id()
    assert prefix_of(again) == prefix_of(parent)
    assert again not in {parent, *child, *second}


def _ids_of_a_forked_child(count: int) -> list[str]:
    """``count`` request ids made in a forked child process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its ids and leave at once (no pytest teardown here)
        try:
            os.write(write_end, " ".join(new_request_id() for _ in range(count)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    return text.split()


def test_a_fresh_generator_numbers_from_one() -> None:
    generate = ids._RequestIds()
    values = [generate() for _ in range(3)]
    assert [value[-12:] for value in values] == [f"{n:012x}" for n in (1, 2, 3)]
    assert len({prefix_of(value) for value in values}) == 1


# --- random_token ------------------------------------------------------------------------------


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
