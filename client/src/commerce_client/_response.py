"""A call's response metadata, captured per call (``Client.with_response``).

The capture lives in a :class:`contextvars.ContextVar`: each thread and each asyncio task has its
own, so concurrent calls on one client never see each other's responses (unlike the shared
``last_rate_limit``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Generic, TypeVar

import httpx

from commerce_client.types.rate_limit import RateLimitInfo

__all__ = ["ResponseInfo", "WithResponse"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseInfo:
    """What the API answered to one call (its last attempt, after any retries)."""

    status_code: int
    headers: Mapping[str, str]
    """Every response header, names in lower case."""
    request_id: str | None
    """``X-Request-Id``: quote it to the operator."""
    rate_limit: RateLimitInfo | None
    retries: int
    """How many times the call was retried before this answer."""

    @classmethod
    def of(cls, response: httpx.Response, retries: int) -> ResponseInfo:
        return cls(
            status_code=response.status_code,
            headers={name.lower(): value for name, value in response.headers.items()},
            request_id=response.headers.get("x-request-id"),
            rate_limit=RateLimitInfo.from_headers(response.headers),
            retries=retries,
        )


@dataclass(frozen=True, slots=True)
class WithResponse(Generic[T]):
    """A call's result (``data``) with its :class:`ResponseInfo` (``response``)."""

    data: T
    response: ResponseInfo


_capture: ContextVar[list[ResponseInfo] | None] = ContextVar("commerce_response", default=None)


@contextlib.contextmanager
def capturing() -> Iterator[list[ResponseInfo]]:
    """Collect the responses of the calls made inside (in this thread or task only)."""
    captured: list[ResponseInfo] = []
    token = _capture.set(captured)
    try:
        yield captured
    finally:
        _capture.reset(token)


def note(response: httpx.Response, retries: int) -> None:
    captured = _capture.get()
    if captured is not None:
        captured.append(ResponseInfo.of(response, retries))
