"""Importing products: records checked and written in bulk, in the caller's one transaction
(all or nothing), as one catalogue change.

The records come as a stream (``import_file.read_records``) and are taken a batch at a time:
a worker thread reads and checks the next batch while the database writes the one before
(``COPY`` on PostgreSQL, one prepared statement on SQLite), so memory holds two batches, not
the file. A record with an ``id`` updates that product (restoring an archived one); several
records with one ``id`` are one update, made in their order. Every product written is stamped
with the import's one change number, and audited (``product.create``, ``product.update``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from commerce_api.accounts.service import Principal
from commerce_api.audit import service as audit
from commerce_api.catalog import import_repository, repository
from commerce_api.catalog.import_file import CsvRecords, InvalidImport, Located, read_records
from commerce_api.catalog.import_rules import (
    ID,
    FieldError,
    NewProducts,
    changed_columns,
    csv_new_products,
    new_product_columns,
)
from commerce_api.catalog.service import audited_change
from commerce_api.core.ids import new_ids
from commerce_api.core.timestamps import utcnow
from commerce_api.storage.executor import Executor

__all__ = [
    "ImportResult",
    "Importer",
    "InvalidImport",
    "Located",
    "import_products",
    "import_records",
    "parse_import_file",
]

BATCH_ROWS = 5000  # records read and written at a time: two batches are in memory at once


@dataclass(frozen=True, slots=True)
class ImportResult:
    created: int
    updated: int


@dataclass(slots=True)
class _Batch:
    new: NewProducts = field(default_factory=NewProducts)
    ids: list[str] = field(default_factory=list)  # the new products'
    now: datetime | None = None  # their created_at and updated_at
    trail: list[dict[str, Any]] = field(default_factory=list)  # the updates' audit rows
    changes: list[tuple[Located, str, dict[str, Any]]] = field(default_factory=list)
    records: int = 0


def _batches(records: Iterable[Located]) -> Iterator[_Batch]:
    """The records checked, as rows to write, ``BATCH_ROWS`` at a time: a CSV file's rows that
    create products checked a column at a time where they can be (``csv_new_products``)."""
    if isinstance(records, CsvRecords):
        for rows in records.batches(BATCH_ROWS):
            new = csv_new_products(rows.header, rows.rows)
            if new is None:
                yield from _batches_of(rows.records())
            else:
                yield _stamped(_Batch(new=new, records=len(new)))
        return
    yield from _batches_of(iter(records))


def _batches_of(records: Iterator[Located]) -> Iterator[_Batch]:
    batch = _Batch()
    for located in records:
        record = located.record
        try:
            if record.get(ID) is None:
                batch.new.append(new_product_columns(record))
            else:
                batch.changes.append((located, *changed_columns(record)))
        except FieldError as problem:
            raise located.error(problem) from None
        batch.records += 1
        if batch.records == BATCH_ROWS:
            yield _stamped(batch)
            batch = _Batch()
    if batch.records:
        yield _stamped(batch)


def _stamped(batch: _Batch) -> _Batch:
    """``batch`` with its new products' ids and time. One time for the batch, and ids in
    ascending order: the products keep the file's order in the catalogue's (created_at, id)
    order."""
    batch.ids = new_ids("prod", len(batch.new))
    batch.now = utcnow()
    return batch


class Importer:
    """One import into the transaction of ``conn``: :meth:`add` records (in one or several
    calls), then read :attr:`result`. Its one change number is taken as it starts."""

    def __init__(self, conn: Executor, principal: Principal | None) -> None:
        self.conn = conn
        self.actor = audit.actor_of(principal)
        self.seq: int | None = None
        self.created = 0
        self.updated: set[str] = set()

    @property
    def result(self) -> ImportResult:
        return ImportResult(created=self.created, updated=len(self.updated))

    async def add(
        self, records: Iterable[Located], progress: Callable[[int], None] | None = None
    ) -> None:
        """Check and write ``records``; ``progress`` is told how many have been read so far.
        The first invalid record raises :class:`InvalidImport`: roll the transaction back."""
        if self.seq is None:
            self.seq = await repository.next_change(self.conn)
        seq = self.seq
        batches = _batches(records)
        writing: asyncio.Task[None] | None = None
        bulk: import_repository.BulkLoad | None = None
        done = 0
        try:
            while (batch := await asyncio.to_thread(next, batches, None)) is not None:
                if writing is not None:
                    await writing
                if done == 0 and batch.records == BATCH_ROWS:  # a large import
                    bulk = await import_repository.begin_bulk(self.conn)
                for located, product_id, columns in batch.changes:
                    await self._update(located, product_id, columns, seq, batch.trail)
                writing = asyncio.create_task(self._write(batch))
                self.created += len(batch.ids)
                done += batch.records
                if progress is not None:
                    progress(done)
            if writing is not None:
                await writing
            if bulk is not None:
                await import_repository.end_bulk(self.conn, seq, bulk)
        except BaseException:
            if writing is not None:  # never leave a write running on the connection
                with contextlib.suppress(BaseException):
                    await writing
            if bulk is not None:
                with contextlib.suppress(Exception):
                    await import_repository.release(self.conn, bulk)
            raise
        if bulk is not None:
            await import_repository.release(self.conn, bulk)

    async def _write(self, batch: _Batch) -> None:
        if batch.ids:
            assert self.seq is not None, "taken as the import starts"
            assert batch.now is not None, "stamped"
            actor = (self.actor.type, self.actor.id)
            products = batch.new.columns() | {"id": batch.ids}
            stamps = {"created_at": batch.now, "updated_at": batch.now, "change_seq": self.seq}
            await import_repository.copy_in_audited(self.conn, products, stamps, actor)
        await audit.record_many(self.conn, batch.trail)

    async def _update(
        self,
        located: Located,
        product_id: str,
        columns: Mapping[str, Any],
        seq: int,
        trail: list[dict[str, Any]],
    ) -> None:
        values = {**columns, "updated_at": utcnow(), "archived_at": None}
        before = await repository.get_for_change(self.conn, product_id, active=False)
        if before is None or not await repository.update_any(self.conn, product_id, values, seq):
            raise InvalidImport(f"{located.place}: no product with id `{product_id}`")
        if changes := audited_change(before, values):
            target = ("product", product_id)
            trail.append(audit.audit_row(self.actor, "product.update", target, changes))
        self.updated.add(product_id)


async def import_records(
    conn: Executor,
    principal: Principal | None,
    records: Iterable[Located],
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import ``records`` (``import_file.read_records``'s) in the transaction of ``conn``."""
    importer = Importer(conn, principal)
    await importer.add(records, progress)
    return importer.result


async def import_products(
    conn: Executor, principal: Principal | None, records: Sequence[Mapping[str, Any]]
) -> ImportResult:
    """Import ``records`` (JSON values); an error names the record (``record 2, field
    price: …``)."""
    located = (
        Located(f"record {index}", "field", dict(record))
        for index, record in enumerate(records, start=1)
    )
    return await import_records(conn, principal, located)


def parse_import_file(name: str, content: str) -> list[dict[str, Any]]:
    """The records of a whole import file held in memory (the console's uploads)."""
    stream = io.BytesIO(content.encode("utf-8", "surrogatepass"))
    return [located.record for located in read_records(name, stream)]
