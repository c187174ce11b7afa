"""``client.audit_events``: the audit trail, who changed what (admin keys only)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime

from commerce_client._pagination import (
    MAX_PAGE_SIZE,
    NewestFirstQuery,
    Page,
    aiterate_after,
    iterate_after,
    parse_page,
)
from commerce_client.resources._base import AsyncResource, SyncResource
from commerce_client.types.audit_event import AuditEvent

__all__ = ["AsyncAuditEvents", "AuditEvents"]


def _query(
    target_id: str | None,
    actor_id: str | None,
    action: str | None,
    created_gte: datetime | str | None,
    created_lt: datetime | str | None,
) -> NewestFirstQuery:
    filters = {"target_id": target_id, "actor_id": actor_id, "action": action}
    return NewestFirstQuery(filters, created_gte, created_lt)


class AuditEvents(SyncResource):
    def list(
        self,
        *,
        target_id: str | None = None,
        actor_id: str | None = None,
        action: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        starting_after: str | None = None,
    ) -> Page[AuditEvent]:
        """One page of the audit trail, newest first: the changes to ``target_id``, by
        ``actor_id`` (a key's id, ``cli`` or ``sweeper``), of ``action`` (such as
        ``"order.fulfill"``); ``starting_after`` for the rows after that one."""
        query = _query(target_id, actor_id, action, created_gte, created_lt)
        return self._page(query.params(limit=limit, offset=offset, starting_after=starting_after))

    def list_all(
        self,
        *,
        target_id: str | None = None,
        actor_id: str | None = None,
        action: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[AuditEvent]:
        """Every matching row, newest first, fetching pages (by cursor) as the iteration
        reaches them: rows recorded meanwhile do not shift them."""
        query = _query(target_id, actor_id, action, created_gte, created_lt)
        return iterate_after(
            lambda after: self._page(query.params(limit=page_size, starting_after=after))
        )

    def _page(self, params: dict[str, str | int | None]) -> Page[AuditEvent]:
        body = self._client._request("GET", "/audit_events", params=params)
        return parse_page(body, AuditEvent.from_dict)


class AsyncAuditEvents(AsyncResource):
    async def list(
        self,
        *,
        target_id: str | None = None,
        actor_id: str | None = None,
        action: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        starting_after: str | None = None,
    ) -> Page[AuditEvent]:
        """See :meth:`AuditEvents.list`."""
        query = _query(target_id, actor_id, action, created_gte, created_lt)
        return await self._page(
            query.params(limit=limit, offset=offset, starting_after=starting_after)
        )

    def list_all(
        self,
        *,
        target_id: str | None = None,
        actor_id: str | None = None,
        action: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> AsyncIterator[AuditEvent]:
        """See :meth:`AuditEvents.list_all` (``async for``)."""
        query = _query(target_id, actor_id, action, created_gte, created_lt)
        return aiterate_after(
            lambda after: self._page(query.params(limit=page_size, starting_after=after))
        )

    async def _page(self, params: dict[str, str | int | None]) -> Page[AuditEvent]:
        body = await self._client._request("GET", "/audit_events", params=params)
        return parse_page(body, AuditEvent.from_dict)
