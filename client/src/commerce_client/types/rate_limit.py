"""The rate-limit headers of a response."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["RateLimitInfo"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimitInfo:
    """``X-RateLimit-*`` of a response: the quota, what is left of it, and when it resets."""

    limit: int
    """Requests allowed in the current window."""
    remaining: int
    """Requests left in the current window."""
    reset: int
    """Unix time, in seconds, at which the window resets."""

    @property
    def reset_at(self) -> datetime:
        """:attr:`reset` as an aware UTC datetime."""
        return datetime.fromtimestamp(self.reset, UTC)

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> RateLimitInfo | None:
        """The three headers, or None when any is missing or not an integer."""
        try:
            return cls(
                limit=int(headers["x-ratelimit-limit"]),
                remaining=int(headers["x-ratelimit-remaining"]),
                reset=int(headers["x-ratelimit-reset"]),
            )
        except (KeyError, ValueError):
            return None
