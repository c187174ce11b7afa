"""Helpers for the client's tests: a scripted fake API for ``httpx.MockTransport``, sample
bodies, and the real server the end-to-end tests run against (started in conftest.py).

Not a test module; pytest puts this directory on ``sys.path`` for the test modules beside it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

import commerce_client

SANDBOX_KEY = "sk_sandbox_" + "a" * 32
LIVE_KEY = "sk_live_" + "a" * 32
BASE_URL = "https://api.test/v1"
RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": "1000",
    "X-RateLimit-Remaining": "998",
    "X-RateLimit-Reset": "1790000000",
}

ADDRESS: commerce_client.ShippingAddressParam = {
    "street": "1 Main St",
    "city": "Springfield",
    "postal_code": "12345",
    "country": "US",
}
"""A shipping address to place orders with."""

Answer = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class MockAPI:
    """Answers requests with queued responses, in order, and records the requests.

    The last queued answer repeats when the queue runs out, so "always 503" is one call.
    """

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self._answers: deque[Answer] = deque()

    def reply(
        self,
        status: int = 200,
        json: object = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> MockAPI:
        all_headers = {"X-Request-Id": f"req_{len(self._answers)}", **RATE_LIMIT_HEADERS}
        all_headers.update(headers or {})
        if content is not None:
            response = httpx.Response(status, content=content, headers=all_headers)
        elif json is not None:
            response = httpx.Response(status, json=json, headers=all_headers)
        else:
            response = httpx.Response(status, headers=all_headers)
        self._answers.append(response)
        return self

    def error(
        self,
        status: int,
        code: str,
        details: str = "",
        message: str = "Something is wrong.",
        headers: Mapping[str, str] | None = None,
        reason: str | None = None,
    ) -> MockAPI:
        """An error answer; without ``reason``, as a server from before reasons wrote it."""
        error = {"code": code, "message": message, "details": details}
        if reason is not None:
            error["reason"] = reason
        return self.reply(status, {"error": error}, headers)

    def answer_with(self, respond: Callable[[httpx.Request], httpx.Response]) -> MockAPI:
        """Answer with ``respond(request)``."""
        self._answers.append(respond)
        return self

    def fail(self, exc: Exception) -> MockAPI:
        self._answers.append(exc)
        return self

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self._answers.popleft() if len(self._answers) > 1 else self._answers[0]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            # A fresh copy each time: a Response can be read only once.
            return httpx.Response(
                answer.status_code, headers=answer.headers, content=answer.content
            )
        return answer(request)

    def client(self, **kwargs: Any) -> commerce_client.Client:
        http = httpx.Client(transport=httpx.MockTransport(self.handler))
        options: dict[str, Any] = {"api_key": SANDBOX_KEY, "base_url": BASE_URL, **kwargs}
        return commerce_client.Client(http_client=http, **options)

    def async_client(self, **kwargs: Any) -> commerce_client.AsyncClient:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self.handler))
        options: dict[str, Any] = {"api_key": SANDBOX_KEY, "base_url": BASE_URL, **kwargs}
        return commerce_client.AsyncClient(http_client=http, **options)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def product_json(**overrides: object) -> dict[str, Any]:
    return {
        "id": "prod_1",
        "name": "A book",
        "description": "Pages.",
        "price": 19.99,
        "category": "books",
        "created_at": "2026-11-21T08:12:41.123Z",
        "inventory_count": 7,
        "updated_at": "2026-11-21T09:00:00.000Z",
        **overrides,
    }


def order_json(**overrides: object) -> dict[str, Any]:
    return {
        "id": "ord_1",
        "status": "pending",
        "customer_id": "cus_1",
        "items": [{"product_id": "prod_1", "name": "A book", "quantity": 3, "unit_price": 0.1}],
        "shipping_address": {
            "street": "1 Main St",
            "line2": None,
            "city": "Springfield",
            "state": None,
            "postal_code": "12345",
            "country": "US",
        },
        "total": 0.3,
        "currency": "USD",
        "created_at": "2026-11-21T08:12:41.123Z",
        "updated_at": "2026-11-21T08:12:41.123Z",
        "fulfilled_at": None,
        "canceled_at": None,
        "tracking": None,
        "version": 1,
        **overrides,
    }


def endpoint_json(**overrides: object) -> dict[str, Any]:
    return {
        "id": "we_1",
        "url": "https://example.com/hooks",
        "events": ["order.created"],
        "description": None,
        "enabled": True,
        "disabled_reason": None,
        "created_at": "2026-11-21T08:12:41.123Z",
        "updated_at": "2026-11-21T08:12:41.123Z",
        **overrides,
    }


def event_json(**overrides: object) -> dict[str, Any]:
    return {
        "id": "evt_1",
        "type": "order.created",
        "created_at": "2026-11-21T08:12:41.123Z",
        "data": order_json(),
        **overrides,
    }


def audit_event_json(**overrides: object) -> dict[str, Any]:
    return {
        "id": "aud_1",
        "created_at": "2026-11-21T08:12:41.123Z",
        "actor": {"type": "key", "id": "key_1"},
        "action": "product.update",
        "target": {"type": "product", "id": "prod_1"},
        "changes": {"price": [12.5, 10], "inventory_count": [3, 0]},
        **overrides,
    }


def page_json(items: list[dict[str, Any]], *, total: int, offset: int = 0) -> dict[str, Any]:
    return {
        "data": items,
        "pagination": {
            "total": total,
            "limit": max(len(items), 1),
            "offset": offset,
            "has_more": offset + len(items) < total,
        },
    }


ORDER_REQUEST: dict[str, Any] = {
    "customer_id": "cus_1",
    "items": [{"product_id": "prod_1", "quantity": 3}],
    "shipping_address": {
        "street": "1 Main St",
        "city": "Springfield",
        "postal_code": "12345",
        "country": "US",
    },
}


@dataclass(frozen=True, slots=True)
class E2EServer:
    """A real ``commerce-api serve`` process and what was prepared in its database."""

    base_url: str
    client_key: str
    admin_key: str
    books: list[str]
    """Ids of the products in category BOOKS, in creation order."""
    sold_out: str
    """A product with no stock."""


BOOKS = "e2e-books"
BOOK_COUNT = 23
