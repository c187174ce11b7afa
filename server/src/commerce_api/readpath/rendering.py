"""The list response, rendered from memory: a page's body, and the list items kept by id."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from commerce_api.catalog.service import list_item
from commerce_api.core.pagination import pagination
from commerce_api.readpath.reader import Reader

ITEM_MEMO_ENTRIES = 20_000  # rendered list items kept (~6 MB)


def page_body(items: list[bytes], total: int, limit: int, offset: int) -> bytes:
    """The list response, byte for byte what ``orjson.dumps`` makes of the page dict."""
    meta = orjson.dumps(pagination(total, limit, offset, len(items)))
    return b'{"data":[' + b",".join(items) + b'],"pagination":' + meta + b"}"


class RenderedItems:
    """List items rendered from their products' rows (``list_item``), kept by id until the
    product changes (``forget``), at most ``ITEM_MEMO_ENTRIES``."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._items: dict[str, bytes] = {}

    def forget(self, product_id: str) -> None:
        self._items.pop(product_id, None)

    def clear(self) -> None:
        self._items.clear()

    async def of(self, ids: list[str], still_current: Callable[[], bool]) -> list[bytes]:
        """The items of ``ids`` (in their order; a product gone since is left out), from
        memory or else from their rows, which are kept if ``still_current()`` says nothing
        changed while they were read."""
        items = self._items
        missing = [product_id for product_id in ids if product_id not in items]
        if not missing:
            return [items[product_id] for product_id in ids]
        fetched = {row.id: row for row in await self._reader.list_items(missing)}
        keep = still_current()
        if keep and len(items) + len(fetched) > ITEM_MEMO_ENTRIES:
            items.clear()
        rendered = {}
        for product_id, row in fetched.items():
            # orjson's bytes are allocated >= 4 KiB whatever their length: a copy to keep is
            # right-sized (~230 bytes).
            rendered[product_id] = bytes(memoryview(orjson.dumps(list_item(row))))
        if keep:
            items.update(rendered)
        return [body for i in ids if (body := items.get(i) or rendered.get(i)) is not None]
