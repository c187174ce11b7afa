"""What every resource shares: a reference to its client, and safe paths."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from commerce_client._client import AsyncClient, Client


def path(template: str, *ids: str) -> str:
    """``path("/orders/{}/cancel", order_id)`` with the id percent-encoded, so an id can never
    reach another route (``../``)."""
    for value in ids:
        if not isinstance(value, str) or not value:
            raise ValueError(f"expected a non-empty id string, got {value!r}")
    return template.format(*(quote(value, safe="") for value in ids))


class SyncResource:
    def __init__(self, client: Client) -> None:
        self._client = client


class AsyncResource:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client
