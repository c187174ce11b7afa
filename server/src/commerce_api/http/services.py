"""What the HTTP layer uses of the services the app assembles (``app.services.Services``), as
protocols: the layer below the packages names none of their types, and nothing here needs to
import them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from commerce_api.accounts.service import Principal
from commerce_api.http.context import RequestContext
from commerce_api.ratelimit.limiter import RateLimiter
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database


class Authenticator(Protocol):
    """Who a key is (the read path, with its cache of keys)."""

    async def authenticate(self, token: str, request: RequestContext) -> Principal: ...


class CatalogReads(Authenticator, Protocol):
    """The read path (``readpath.service.ReadPath``): keys, and the catalogue's cached bytes."""

    async def page(
        self, request: RequestContext, category: str | None, limit: int, offset: int, sort: str
    ) -> bytes | None: ...

    async def categories(self, request: RequestContext) -> bytes | None: ...

    async def search(
        self,
        request: RequestContext,
        q: str,
        category: str | None,
        sort: str,
        limit: int,
        offset: int,
    ) -> bytes: ...

    async def product_body(self, request: RequestContext, product_id: str) -> bytes | None: ...


class PlacedOrder(Protocol):
    """An order's outcome (``orders.batch_plan.PlacementResult``): a plain value the route
    renders."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def body(self) -> bytes: ...


class OrderPlacer(Protocol):
    """The order desk (``orders.desk.OrderDesk``), given an ``orders.batch_plan.OrderRequest``
    (a type of the package above this layer)."""

    async def place(self, request: Any) -> PlacedOrder: ...


class RequestServices(Protocol):
    """The services a request may use: the app's container (``app.services.Services``)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def db(self) -> Database: ...

    @property
    def rate_limiter(self) -> RateLimiter: ...

    @property
    def secret_box(self) -> SecretBox: ...

    @property
    def read_path(self) -> CatalogReads: ...

    @property
    def orders(self) -> OrderPlacer: ...
