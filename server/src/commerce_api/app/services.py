"""The services a request handler needs, assembled once per process by the app's lifespan
(``factory.py``): the container (``Services``), and how it is opened and closed.

Routes ask for it with ``http.dependencies.ServicesDep``, typed with the protocol of
``http.services`` (the layer below the packages cannot name their types), or with their own
protocols built on it (``catalog.routes.CatalogServices``, ``orders.routes.OrderServices``);
this container has those, as the assignment at the end has mypy check.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from commerce_api.catalog.routes import CatalogServices
from commerce_api.http.services import RequestServices
from commerce_api.orders.desk import OrderDesk
from commerce_api.orders.routes import OrderServices
from commerce_api.ratelimit.limiter import MemoryStore, RateLimiter, RateLimitStore
from commerce_api.ratelimit.redis_store import RedisStore
from commerce_api.readpath.service import ReadPath
from commerce_api.settings import Settings
from commerce_api.storage.connecting import SERVER_SETTINGS
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database
from commerce_api.storage.deadlines import database_deadlines
from commerce_api.webhooks import service as webhooks

logger = logging.getLogger("commerce_api.storage")


@dataclass(frozen=True, slots=True)
class Services:
    """What a request handler needs, built once per process by :func:`open_services`."""

    settings: Settings
    db: Database
    rate_limiter: RateLimiter
    secret_box: SecretBox
    read_path: ReadPath
    orders: OrderDesk  # places orders in batches that share a commit (orders/placement.py)

    async def close(self) -> None:
        """Close what :func:`open_services` opened, the database last."""
        await self.read_path.close()
        await self.orders.close()
        await self.rate_limiter.close()
        await self.db.dispose()


def rate_limit_store(settings: Settings) -> RateLimitStore:
    """Redis when configured (counters shared by every process), else in-process counters."""
    if settings.redis_url:
        return RedisStore(settings.redis_url, settings.redis_key_prefix)
    return MemoryStore()


async def open_services(settings: Settings) -> Services:
    """Open the database, the rate limiter, the secret box, the read path and the order desk."""
    db = Database(
        settings.database_url,
        deadlines=database_deadlines(settings),
        listen_url=settings.database_listen_url,
        background_checkpoints=True,  # SQLite: no request pays for a checkpoint
    )
    for name, value in (await db.unapplied_settings()).items():
        logger.warning(
            "through the pooler, PostgreSQL's %s is %s, not %s: set it on the role"
            " (docs/deployment.md)",
            name,
            value,
            SERVER_SETTINGS[name],
        )
    secret_box = await webhooks.open_secret_box(settings, db)
    return Services(
        settings=settings,
        db=db,
        rate_limiter=RateLimiter(settings, rate_limit_store(settings)),
        secret_box=secret_box,
        read_path=await ReadPath.open(db, settings.environment),
        orders=OrderDesk(
            db, settings.currency, secret_box, in_flight=settings.order_batches_in_flight
        ),
    )


# What the routes are given has what they use: the kit's, and each route module's own.
_CONFORMS: tuple[type[RequestServices], type[CatalogServices], type[OrderServices]] = (
    Services,
    Services,
    Services,
)
