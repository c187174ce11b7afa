"""Serves the two catalogue reads clients poll — ``GET /v1/products`` and
``GET /v1/products/{id}`` — straight from the read path, ahead of FastAPI's routing,
dependency injection and validation (which cost more than the rest of the request together).

Only the plain, valid form of each request is answered here; anything else — an unknown or
malformed parameter, a missing or bad key, an unknown id, a stale cache — goes on to the
FastAPI route, which owns every error message. So the two paths cannot disagree on an error;
on a success they produce the same bytes (the tests run against both).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import orjson
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from commerce_api.catalog.schemas import MAX_CATEGORY_LENGTH
from commerce_api.dependencies import get_services, optional_principal
from commerce_api.pagination import DEFAULT_PAGE_SIZE, MAX_OFFSET, clamp
from commerce_api.readpath.service import ReadPath

LIST_PATH = "/v1/products"
DETAIL_PREFIX = "/v1/products/"
_JSON = (b"content-type", b"application/json")


def _number(text: str, low: int, high: int) -> int | None:
    if not (0 < len(text) <= 16 and text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if low <= value <= high else None


def _list_query(query_string: bytes) -> tuple[str | None, int, int] | None:
    """(category, limit, offset) for a plain valid query; None for anything else."""
    if not query_string:
        return None, DEFAULT_PAGE_SIZE, 0
    try:
        pairs = parse_qsl(
            query_string.decode("ascii"),
            keep_blank_values=True,
            strict_parsing=True,
            errors="strict",
        )
    except (UnicodeDecodeError, ValueError):
        return None
    params = dict(pairs)
    if len(params) != len(pairs) or not params.keys() <= {"limit", "offset", "category"}:
        return None
    limit = _number(params.get("limit", str(DEFAULT_PAGE_SIZE)), 1, 10**15)
    offset = _number(params.get("offset", "0"), 0, MAX_OFFSET)
    category = params.get("category")
    if limit is None or offset is None:
        return None
    if category is not None and not (
        0 < len(category) <= MAX_CATEGORY_LENGTH
        and category.isprintable()
        and category.encode("utf-8", "strict")
    ):
        return None
    return category, clamp(limit), offset


class ReadPathMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            path: str = scope["path"]
            body: bytes | None = None
            if path == LIST_PATH:
                body = await self._list(scope)
            elif path.startswith(DETAIL_PREFIX) and "/" not in path[len(DETAIL_PREFIX) :]:
                body = await self._detail(scope, path[len(DETAIL_PREFIX) :])
            if body is not None:
                headers = [_JSON, (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    async def _read_path(self, scope: Scope) -> ReadPath | None:
        """The read path if the caller has a valid key; None sends the request to FastAPI."""
        request = Request(scope)
        if await optional_principal(request) is None:
            return None
        read_path: ReadPath = get_services(request).read_path
        return read_path

    async def _list(self, scope: Scope) -> bytes | None:
        query = _list_query(scope.get("query_string", b""))
        if query is None:
            return None
        read_path = await self._read_path(scope)
        return None if read_path is None else await read_path.page(scope["state"], *query)

    async def _detail(self, scope: Scope, product_id: str) -> bytes | None:
        if scope.get("query_string"):
            return None
        read_path = await self._read_path(scope)
        if read_path is None:
            return None
        product: dict[str, Any] | None = await read_path.product(product_id)
        return None if product is None else orjson.dumps(product)
