"""Where a process places its orders: :class:`OrderDesk`, a group commit of
``placement.place_batch`` (orders that arrive at the same moment share one transaction and one
durable commit), and :func:`create_order` for one order in the caller's transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.accounts.service import Principal
from commerce_api.core.errors import APIError
from commerce_api.orders import placement
from commerce_api.orders.batch_plan import OrderRequest, PlacementResult, Result
from commerce_api.orders.schemas import OrderCreate
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database, Executor
from commerce_api.storage.group_commit import GroupCommit


def _key_of(request: OrderRequest) -> tuple[str, str] | None:
    return None if request.keyed is None else (request.keyed.scope, request.keyed.key)


async def create_order(
    conn: AsyncConnection, principal: Principal, data: OrderCreate, currency: str
) -> dict[str, Any]:
    """Place one order without a key in the caller's transaction (the CLI and tests); its
    record, or the order's 4xx raised."""
    (result,) = await placement.place_batch(
        conn, [OrderRequest(principal, data)], currency=currency, secret_box=None
    )
    if isinstance(result, APIError):
        raise result
    assert result.order is not None
    return result.order


class OrderDesk:
    """Where a process places its orders: a group commit of ``placement.place_batch``."""

    def __init__(
        self, db: Database, currency: str, secret_box: SecretBox, *, in_flight: int = 1
    ) -> None:
        """``in_flight``: on PostgreSQL, the batches in their transactions at once (the setting
        ``COMMERCE_ORDER_BATCHES_IN_FLIGHT``): a second overlaps the first's waits on the wire,
        the row locks ordering the two as they order other processes' batches. SQLite's
        batches take turns on the file's write lock: one at a time."""
        self._currency = currency
        self._secret_box = secret_box
        self._backend = placement.backend_for(db.backend)
        self._batches: GroupCommit[OrderRequest, Result] = GroupCommit(
            db,
            self._place,
            exclusive=_key_of,
            in_flight=self._backend.batches_in_flight(in_flight),
            traceparent_of=lambda request: request.traceparent,
        )

    async def _place(self, conn: Executor, batch: list[OrderRequest]) -> list[Result]:
        return await placement.place_batch(
            conn, batch, currency=self._currency, secret_box=self._secret_box, backend=self._backend
        )

    async def place(self, request: OrderRequest) -> PlacementResult:
        """The order's outcome once it is durable; raises the errors that are not stored."""
        result = await self._batches.submit(request)
        if isinstance(result, APIError):
            raise result
        return result

    @property
    def stats(self) -> tuple[int, int]:
        """(batches committed, orders they carried): for tests and the benchmark."""
        return self._batches.batches, self._batches.items

    async def close(self) -> None:
        await self._batches.close()
