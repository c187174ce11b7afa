"""The lists' CSV exports: streamed, a chunk of rows at a time, each chunk read by keyset (after
the last row of the one before) in a read of its own, so memory and the time a connection is
held stay the same however long the list is, and no connection waits on a slow download."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import StreamingResponse

from commerce_api.core.spreadsheet import neutralise_cell
from commerce_api.core.timestamps import utcnow
from commerce_api.storage.db import Database

EXPORT_CHUNK = 500
"""Rows read (and sent) at a time."""

CsvRow = Sequence[object]
# Reads the rows after a cursor (None: from the start), at most ``limit``; answers their CSV
# rows and the cursor after them, None when there are no more.
ChunkReader = Callable[[AsyncConnection, Any, int], Awaitable[tuple[list[CsvRow], Any]]]


def csv_text(rows: Iterable[CsvRow]) -> str:
    """Rows as CSV (RFC 4180: CRLF, fields quoted when they hold a comma, quote or newline),
    every cell neutralised against formulas (``core.spreadsheet``)."""
    buffer = io.StringIO()
    csv.writer(buffer).writerows([neutralise_cell(cell) for cell in row] for row in rows)
    return buffer.getvalue()


async def keyset_chunks(db: Database, read: ChunkReader) -> AsyncIterator[list[CsvRow]]:
    cursor: Any = None
    while True:
        async with db.read() as conn:
            rows, cursor = await read(conn, cursor, EXPORT_CHUNK)
        if rows:
            yield rows
        if cursor is None:
            return


def csv_download(
    name: str, header: CsvRow, chunks: AsyncIterator[list[CsvRow]]
) -> StreamingResponse:
    """A CSV file named ``{name}-{UTC time}.csv``, its header row then the chunks' rows; with
    a byte-order mark, so spreadsheets read it as UTF-8 (the products' import skips it)."""

    async def body() -> AsyncIterator[str]:
        yield "\ufeff" + csv_text([header])
        async for rows in chunks:
            yield csv_text(rows)

    filename = f"{name}-{utcnow():%Y%m%d-%H%M%S}.csv"
    return StreamingResponse(
        body(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
