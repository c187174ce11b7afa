"""Listings for a terminal: a header row, then aligned columns (as ``gh`` and ``kubectl``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

COLUMN_GAP = "  "


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The header and the rows, each column as wide as its widest cell; the last column is not
    padded, so no line ends in spaces."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [
        COLUMN_GAP.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
    return "\n".join(lines)


def echo_listing(
    records: Sequence[Mapping[str, Any]],
    columns: Mapping[str, Callable[[Mapping[str, Any]], object]],
    *,
    as_json: bool,
) -> None:
    """``records`` as a JSON array (``--json``: every field) or as a table of ``columns``: a
    header (each column's name) and one row per record (the column's function of it)."""
    if as_json:
        click.echo(json.dumps(list(records), indent=2))
        return
    rows = [[str(cell(record)) for cell in columns.values()] for record in records]
    click.echo(render_table(list(columns), rows))
