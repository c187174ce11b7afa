"""What the HTTP layer uses of the services the app assembles (``app.services.Services``), as
protocols: the layer below the packages names none of their types, and nothing here needs to
import them. A route module that uses more of them says so with a protocol of its own, built
on :class:`RequestServices` (``catalog.routes.CatalogServices``,
``orders.routes.OrderServices``)."""

from __future__ import annotations

from typing import Protocol

from commerce_api.accounts.service import Principal
from commerce_api.http.context import RequestContext
from commerce_api.ratelimit.limiter import RateLimiter
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database


class Authenticator(Protocol):
    """Who a key is (the read path, with its cache of keys)."""

    async def authenticate(self, token: str, request: RequestContext) -> Principal: ...


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
    def read_path(self) -> Authenticator: ...
