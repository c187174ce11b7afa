"""The rate limiter's decision as the headers of an answer (``pipeline.rate_limit_headers``)."""

from __future__ import annotations

from commerce_api.http.pipeline import rate_limit_headers
from commerce_api.ratelimit.limiter import Decision


def test_an_admitted_request_gets_limit_remaining_and_reset() -> None:
    headers = rate_limit_headers(
        Decision(limit=3, remaining=2, reset=1_700_000_000, retry_after=None)
    )
    assert headers == [
        (b"x-ratelimit-limit", b"3"),
        (b"x-ratelimit-remaining", b"2"),
        (b"x-ratelimit-reset", b"1700000000"),
    ]


def test_a_refusal_also_says_when_to_retry() -> None:
    refused = Decision(limit=3, remaining=0, reset=1_700_000_000, retry_after=42)
    assert not refused.allowed
    assert rate_limit_headers(refused)[-1] == (b"retry-after", b"42")
