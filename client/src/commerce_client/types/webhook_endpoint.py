"""Webhook endpoints: where the API delivers your account's events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

from commerce_client import _parse

__all__ = ["WebhookEndpoint", "WebhookEndpointWithSecret"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookEndpoint:
    id: str
    url: str
    events: list[str]
    """Event types delivered to this endpoint; empty means every type."""
    description: str | None
    enabled: bool
    disabled_reason: str | None
    """Why the API disabled the endpoint (a ``410 Gone``, repeated failures), if it did."""
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(**_endpoint_fields(data))


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookEndpointWithSecret(WebhookEndpoint):
    """What ``create()`` and ``rotate_secret()`` return: the endpoint and its signing secret,
    shown only this once. Pass it to :func:`commerce_client.verify_webhook`."""

    secret: str
    """``whsec_…``"""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(**_endpoint_fields(data), secret=data["secret"])


def _endpoint_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": data["id"],
        "url": data["url"],
        "events": list(data.get("events") or []),
        "description": data.get("description"),
        "enabled": data["enabled"],
        "disabled_reason": data.get("disabled_reason"),
        "created_at": _parse.timestamp(data["created_at"]),
        "updated_at": _parse.timestamp(data["updated_at"]),
    }
