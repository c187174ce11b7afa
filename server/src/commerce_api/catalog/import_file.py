"""Reading an import file as a stream: its records one at a time, each with where it is in the
file, never the whole file in memory.

A CSV file (by its name) has a header row naming its columns; any other file is a JSON array
of objects. Every error names where it is: ``line 12, column price: …`` (CSV), ``line 12,
field price: …`` (JSON: the line the record starts on).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from commerce_api.catalog.import_rules import FIELDS, ID, FieldError, csv_value
from commerce_api.core.spreadsheet import restore_cell


class InvalidImport(ValueError):
    """A record of an import file is invalid; nothing was written."""


@dataclass(frozen=True, slots=True)
class Located:
    """A record, and where it is: ``place`` ("line 12") and what its fields are called there
    (``label``: "column" or "field")."""

    place: str
    label: str
    record: dict[str, Any]

    def error(self, problem: FieldError) -> InvalidImport:
        return InvalidImport(f"{self.place}, {self.label} {problem.field}: {problem.problem}")


class CountingReader(io.RawIOBase):
    """A binary file that counts the bytes read from it (how far an import has got)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        self.bytes_read += count or 0
        return int(count or 0)


class ImportFile:
    """An import file on disk, open for :meth:`records` (``with ImportFile(path) as file:``),
    with how far they have been read (:meth:`bytes_read` of :attr:`size`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size
        self._raw = CountingReader(path.open("rb"))

    def __enter__(self) -> ImportFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._raw.raw.close()

    def bytes_read(self) -> int:
        return self._raw.bytes_read

    def records(self) -> Iterator[Located]:
        return read_records(self.path.name, io.BufferedReader(self._raw, 1 << 16))


@dataclass(frozen=True, slots=True)
class RowBatch:
    """Rows of a CSV file as read, each a list of cells under ``header``, and the line each
    starts on."""

    header: list[str]
    rows: list[list[str]]
    lines: list[int]

    def records(self) -> Iterator[Located]:
        """The rows as records, each checked (the first invalid one raises)."""
        for line, row in zip(self.lines, self.rows, strict=True):
            yield Located(f"line {line}", "column", _csv_record(line, self.header, row))


class CsvRecords(Iterator[Located]):
    """The records of a CSV file, one at a time; or, with :meth:`batches`, its rows a batch
    at a time, unchecked (for rules checked a column at a time: ``import_rules``)."""

    def __init__(self, text: IO[str]) -> None:
        self.text = text
        self._records: Iterator[Located] | None = None

    def __next__(self) -> Located:
        if self._records is None:
            self._records = (located for batch in self.batches(1) for located in batch.records())
        return next(self._records)

    def batches(self, size: int) -> Iterator[RowBatch]:
        """The rows, ``size`` at a time (the last batch fewer), empty lines left out."""
        reader = csv.reader(self.text, strict=True)
        try:
            header = [column.strip() for column in next(reader, [])]
            for column in header:
                if column not in FIELDS and column != ID:
                    known = ", ".join(sorted(FIELDS | {ID}))
                    raise InvalidImport(f"line 1, column {column}: unknown column (known: {known})")
            rows: list[list[str]] = []
            lines: list[int] = []
            line = reader.line_num + 1
            for row in reader:
                if row:
                    rows.append(row)
                    lines.append(line)
                    if len(rows) == size:
                        yield RowBatch(header, rows, lines)
                        rows, lines = [], []
                line = reader.line_num + 1
            if rows:
                yield RowBatch(header, rows, lines)
        except csv.Error as exc:
            raise InvalidImport(f"line {reader.line_num}: not valid CSV ({exc})") from None
        except UnicodeDecodeError as exc:
            raise InvalidImport(f"the file is not UTF-8 text ({exc.reason})") from None


def read_records(name: str, binary: IO[bytes]) -> Iterator[Located]:
    """The records of an import file named ``name`` (UTF-8, a byte-order mark allowed): a
    :class:`CsvRecords` for a CSV file."""
    text = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="")
    if name.lower().endswith(".csv"):
        return CsvRecords(text)
    return _json_file_records(text)


def _json_file_records(text: IO[str]) -> Iterator[Located]:
    try:
        yield from json_records(text)
    except UnicodeDecodeError as exc:
        raise InvalidImport(f"the file is not UTF-8 text ({exc.reason})") from None


def _csv_record(line: int, header: list[str], row: list[str]) -> dict[str, Any]:
    if len(row) != len(header):
        raise InvalidImport(
            f"line {line}: wrong number of columns ({len(row)}, the header has {len(header)})"
        )
    record: dict[str, Any] = {}
    for column, value in zip(header, row, strict=True):
        if column == ID and not value.strip():
            continue
        try:
            # restore_cell undoes the apostrophe our export puts before a formula's first character
            record[column] = csv_value(column, restore_cell(value))
        except FieldError as problem:
            raise InvalidImport(f"line {line}, column {column}: {problem.problem}") from None
    return record


_CHUNK = 1 << 16
# A record longer than this that still does not parse is invalid, not cut off by the chunk.
_MAX_RECORD = 1 << 20
_SPACE = " \t\r\n"


def json_records(text: IO[str]) -> Iterator[Located]:
    """The objects of a JSON array, parsed one at a time from the stream."""
    decoder = json.JSONDecoder()
    buffer, pos, line, eof = "", 0, 1, False

    def more() -> bool:
        nonlocal buffer, pos, eof
        chunk = text.read(_CHUNK)
        eof = not chunk
        buffer, pos = buffer[pos:] + chunk, 0
        return not eof

    def skip_space() -> str:
        nonlocal pos, line
        while True:
            while pos < len(buffer) and buffer[pos] in _SPACE:
                line += buffer[pos] == "\n"
                pos += 1
            if pos < len(buffer) or not more():
                return buffer[pos : pos + 1]

    if skip_space() != "[":
        raise InvalidImport(f"line {line}: expected a JSON array of product objects")
    pos += 1
    index = 0
    while True:
        first = skip_space()
        if first == "]" and index == 0:
            break
        index += 1
        while True:
            try:
                value, end = decoder.raw_decode(buffer, pos)
                break
            except json.JSONDecodeError as exc:
                where = line + buffer.count("\n", pos, exc.pos)
                if eof or len(buffer) - pos > _MAX_RECORD or not more():
                    raise InvalidImport(f"line {where}: not valid JSON: {exc.msg}") from None
        if not isinstance(value, dict):
            raise InvalidImport(f"line {line}: expected a JSON array of product objects")
        yield Located(f"line {line}", "field", value)
        line += buffer.count("\n", pos, end)
        pos = end
        separator = skip_space()
        pos += 1
        if separator == "]":
            break
        if separator != ",":
            raise InvalidImport(f"line {line}: not valid JSON: expected ',' or ']'")
    if skip_space():
        raise InvalidImport(f"line {line}: not valid JSON: extra data after the array")
