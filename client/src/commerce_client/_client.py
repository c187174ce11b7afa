"""``Client`` and ``AsyncClient``: configuration, the request loop with retries, and errors.

Both share :class:`_BaseClient` (configuration, building requests, reading responses); they
differ only in how they send and wait.
"""

from __future__ import annotations

import copy
import platform
import uuid
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Final, ParamSpec, Self, TypeVar

import httpx

from commerce_client import _config, _parse, _response, _retry
from commerce_client._config import BASE_URLS
from commerce_client._errors import (
    APIConnectionError,
    APITimeoutError,
    CommerceError,
    error_from_response,
)
from commerce_client._response import WithResponse
from commerce_client._types import NOT_GIVEN, Environment, NotGiven
from commerce_client._version import __version__
from commerce_client.resources.audit_events import AsyncAuditEvents, AuditEvents
from commerce_client.resources.categories import AsyncCategories, Categories
from commerce_client.resources.events import AsyncEvents, Events
from commerce_client.resources.orders import AsyncOrders, Orders
from commerce_client.resources.products import AsyncProducts, Products
from commerce_client.resources.webhook_endpoints import AsyncWebhookEndpoints, WebhookEndpoints
from commerce_client.types.rate_limit import RateLimitInfo

__all__ = ["BASE_URLS", "DEFAULT_TIMEOUT", "AsyncClient", "Client"]

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds, for each attempt of a request."""

_USER_AGENT: Final = f"commerce-client/{__version__} python/{platform.python_version()}"

P = ParamSpec("P")
R = TypeVar("R")


class _BaseClient:
    """Configuration and the parts of a request that do not depend on sync or async."""

    api_key: str
    environment: Environment
    base_url: str
    max_retries: int
    timeout: float | httpx.Timeout | None
    extra_headers: Mapping[str, str]
    last_rate_limit: RateLimitInfo | None
    """``X-RateLimit-*`` of the last response received (an error's too), or None before any.
    Shared by every call on this client: for one call's figures, use :meth:`with_response`."""

    def __init__(
        self,
        *,
        api_key: str | None,
        environment: Environment | None,
        base_url: str | None,
        max_retries: int,
        timeout: float | httpx.Timeout | None,
    ) -> None:
        config = _config.resolve(api_key, environment, base_url)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, not {max_retries!r}.")
        self.api_key = config.api_key
        self.environment = config.environment
        self.base_url = config.base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self.extra_headers = {}
        self.last_rate_limit = None

    def with_options(
        self,
        *,
        timeout: float | httpx.Timeout | NotGiven | None = NOT_GIVEN,
        max_retries: int | NotGiven = NOT_GIVEN,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy of this client with other settings, for one call or a few::

            client.with_options(timeout=5, max_retries=0).orders.get(order_id)

        It shares this client's connections (closing it closes nothing). ``extra_headers``
        are sent with every request, after the client's own (``Idempotency-Key`` is set per
        call with ``idempotency_key=``; ``Authorization`` cannot be replaced)."""
        clone = copy.copy(self)
        if not isinstance(timeout, NotGiven):
            clone.timeout = timeout
        if not isinstance(max_retries, NotGiven):
            if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
                raise ValueError(f"max_retries must be an integer >= 0, not {max_retries!r}.")
            clone.max_retries = max_retries
        if extra_headers:
            clone.extra_headers = {**self.extra_headers, **extra_headers}
        clone._owns_http = False
        clone._bind_resources()
        return clone

    _owns_http: bool

    def _bind_resources(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:  # never show the key
        return (
            f"{type(self).__name__}(environment={self.environment!r}, base_url={self.base_url!r})"
        )

    def _build_request(
        self,
        http: httpx.Client | httpx.AsyncClient,
        method: str,
        path: str,
        params: Mapping[str, str | int | None] | None,
        json: object | None,
        idempotency_key: str | None,
    ) -> httpx.Request:
        headers = {
            "Accept": "application/json",
            "User-Agent": _USER_AGENT,
            **self.extra_headers,
            "Authorization": f"Bearer {self.api_key}",
        }
        if method == "POST":
            # One key per call, reused by every retry of it: what makes retrying a POST safe.
            headers["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
        query = {name: value for name, value in (params or {}).items() if value is not None}
        extra: dict[str, Any] = {} if self.timeout is None else {"timeout": self.timeout}
        return http.build_request(
            method,
            self.base_url + path,
            params=query or None,
            json=json,
            headers=headers,
            **extra,
        )

    def _note_rate_limit(self, response: httpx.Response) -> None:
        self.last_rate_limit = RateLimitInfo.from_headers(response.headers)

    def _read(self, response: httpx.Response, retries: int) -> Any:
        """The decoded body of a response, or the error it stands for."""
        self._note_rate_limit(response)
        _response.note(response, retries)
        if response.is_success:
            if response.status_code == 204 or not response.content:
                return None
            try:
                return _parse.loads(response.content)
            except ValueError as exc:
                raise CommerceError(
                    f"The API answered {response.status_code} with a body that is not JSON.",
                    status_code=response.status_code,
                    request_id=response.headers.get("x-request-id"),
                ) from exc
        raise error_from_response(response)

    def _delay_after_response(
        self, request: httpx.Request, response: httpx.Response, retries_done: int
    ) -> float | None:
        if retries_done >= self.max_retries or not _retry.is_repeatable(request):
            return None
        return _retry.delay_for_response(response, retries_done)

    def _delay_after_exception(
        self, request: httpx.Request, exc: httpx.TransportError, retries_done: int
    ) -> float | None:
        if retries_done >= self.max_retries or not _retry.is_repeatable(request):
            return None
        if not _retry.is_retryable_exception(exc):
            return None
        return _retry.backoff_delay(retries_done)


def _connection_error(exc: httpx.TransportError, request: httpx.Request) -> APIConnectionError:
    cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    what = "timed out" if cls is APITimeoutError else f"failed ({type(exc).__name__}: {exc})"
    return cls(f"The request to {request.method} {request.url} {what}.")


class Client(_BaseClient):
    """The Commerce API, synchronously.

    ``api_key``, ``environment`` and ``base_url`` default to ``COMMERCE_API_KEY``,
    ``COMMERCE_ENVIRONMENT`` and ``COMMERCE_BASE_URL``. Use it as a context manager, or call
    :meth:`close`.
    """

    products: Products
    categories: Categories
    orders: Orders
    webhook_endpoints: WebhookEndpoints
    events: Events
    audit_events: AuditEvents

    def __init__(
        self,
        api_key: str | None = None,
        environment: Environment | None = None,
        base_url: str | None = None,
        max_retries: int = _retry.DEFAULT_MAX_RETRIES,
        timeout: float | httpx.Timeout | None = None,
        *,
        http_client: httpx.Client | None = None,
    ) -> None:
        """``timeout`` (seconds per attempt) defaults to 30, or to ``http_client``'s own.
        An ``http_client`` you pass stays yours: :meth:`close` does not close it."""
        if timeout is None and http_client is None:
            timeout = DEFAULT_TIMEOUT
        super().__init__(
            api_key=api_key,
            environment=environment,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
        )
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client()
        self._bind_resources()

    def _bind_resources(self) -> None:
        self.products = Products(self)
        self.categories = Categories(self)
        self.orders = Orders(self)
        self.webhook_endpoints = WebhookEndpoints(self)
        self.events = Events(self)
        self.audit_events = AuditEvents(self)

    def with_response(
        self, method: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> WithResponse[R]:
        """Call ``method`` (a method of this client's resources) and return its result with the
        response's status, headers, request id and rate-limit figures::

            result = client.with_response(client.orders.get, order_id)
            result.data.status, result.response.request_id, result.response.rate_limit

        Safe with concurrent calls (each thread sees only its own). For a method that pages
        through results (``list_all``), use ``list`` instead."""
        with _response.capturing() as captured:
            data = method(*args, **kwargs)
        if not captured:
            raise TypeError("with_response() takes a method of this client that calls the API.")
        return WithResponse(data, captured[-1])

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int | None] | None = None,
        json: object | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        request = self._build_request(self._http, method, path, params, json, idempotency_key)
        retries_done = 0
        while True:
            try:
                response = self._http.send(request)
            except httpx.TransportError as exc:
                delay = self._delay_after_exception(request, exc, retries_done)
                if delay is None:
                    raise _connection_error(exc, request) from exc
            else:
                delay = self._delay_after_response(request, response, retries_done)
                if delay is None:
                    return self._read(response, retries_done)
                self._note_rate_limit(response)
                response.close()
            _retry.sleep(delay)
            retries_done += 1

    def close(self) -> None:
        """Close the connections (not those of an ``http_client`` you passed)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient(_BaseClient):
    """The Commerce API, with ``await`` and ``async for``; the same resources and methods as
    :class:`Client`. Use it as an async context manager, or ``await`` :meth:`close`."""

    products: AsyncProducts
    categories: AsyncCategories
    orders: AsyncOrders
    webhook_endpoints: AsyncWebhookEndpoints
    events: AsyncEvents
    audit_events: AsyncAuditEvents

    def __init__(
        self,
        api_key: str | None = None,
        environment: Environment | None = None,
        base_url: str | None = None,
        max_retries: int = _retry.DEFAULT_MAX_RETRIES,
        timeout: float | httpx.Timeout | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        """See :class:`Client`."""
        if timeout is None and http_client is None:
            timeout = DEFAULT_TIMEOUT
        super().__init__(
            api_key=api_key,
            environment=environment,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
        )
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient()
        self._bind_resources()

    def _bind_resources(self) -> None:
        self.products = AsyncProducts(self)
        self.categories = AsyncCategories(self)
        self.orders = AsyncOrders(self)
        self.webhook_endpoints = AsyncWebhookEndpoints(self)
        self.events = AsyncEvents(self)
        self.audit_events = AsyncAuditEvents(self)

    async def with_response(
        self, method: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> WithResponse[R]:
        """See :meth:`Client.with_response`; safe with concurrent tasks (each sees only its
        own response)."""
        with _response.capturing() as captured:
            data = await method(*args, **kwargs)
        if not captured:
            raise TypeError("with_response() takes a method of this client that calls the API.")
        return WithResponse(data, captured[-1])

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int | None] | None = None,
        json: object | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        request = self._build_request(self._http, method, path, params, json, idempotency_key)
        retries_done = 0
        while True:
            try:
                response = await self._http.send(request)
            except httpx.TransportError as exc:
                delay = self._delay_after_exception(request, exc, retries_done)
                if delay is None:
                    raise _connection_error(exc, request) from exc
            else:
                delay = self._delay_after_response(request, response, retries_done)
                if delay is None:
                    return self._read(response, retries_done)
                self._note_rate_limit(response)
                await response.aclose()
            await _retry.async_sleep(delay)
            retries_done += 1

    async def close(self) -> None:
        """Close the connections (not those of an ``http_client`` you passed)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
