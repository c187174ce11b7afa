"""Compact columns for the in-memory catalogue: a million products' ids and names in a few
tens of megabytes, where a Python ``str`` per value (and a ``dict`` from id to slot) would take
over 150 MB (docs/performance.md, "Catalogue").
"""

from __future__ import annotations

from array import array

EMPTY = -1  # an IdTable entry never used
GONE = -2  # an IdTable entry whose slot was dropped (the probe goes on past it)


class TextColumn:
    """Texts by slot, as UTF-8 in one growing buffer. A value's bytes compare as the text
    does by code point (UTF-8 keeps that order), so orders by name compare them as they are.
    A changed value is appended; the old bytes stay until the catalogue is built again."""

    __slots__ = ("_buffer", "_lengths", "_starts")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._starts = array("q")
        self._lengths = array("i")

    def append(self, text: str) -> None:
        encoded = text.encode()
        self._starts.append(len(self._buffer))
        self._lengths.append(len(encoded))
        self._buffer += encoded

    def set(self, slot: int, text: str) -> None:
        encoded = text.encode()
        if encoded != self.get(slot):
            self._starts[slot] = len(self._buffer)
            self._lengths[slot] = len(encoded)
            self._buffer += encoded

    def get(self, slot: int) -> bytes:
        start = self._starts[slot]
        return bytes(self._buffer[start : start + self._lengths[slot]])

    def text(self, slot: int) -> str:
        start = self._starts[slot]
        return self._buffer[start : start + self._lengths[slot]].decode()

    def __len__(self) -> int:
        return len(self._starts)


class IdTable:
    """Slot by product id: an open-addressing hash table (linear probing) of slots in one
    ``array('i')``, the ids themselves read from the ids column. Python's ``hash`` of the id
    text, so a table lives in one process only (as the catalogue does)."""

    __slots__ = ("_ids", "_mask", "_table", "_used")

    def __init__(self, ids: TextColumn, capacity: int) -> None:
        size = 1024
        while size < 2 * capacity:
            size *= 2
        self._ids = ids
        self._table = array("i", [EMPTY]) * size
        self._mask = size - 1
        self._used = 0  # entries not EMPTY (GONE ones too)

    def find(self, product_id: str) -> int | None:
        wanted = product_id.encode()
        table, mask, ids = self._table, self._mask, self._ids
        at = hash(product_id) & mask
        while (slot := table[at]) != EMPTY:
            if slot != GONE and ids.get(slot) == wanted:
                return slot
            at = (at + 1) & mask
        return None

    def add(self, product_id: str, slot: int) -> None:
        """Add ``slot`` (not here yet) under ``product_id``."""
        if 2 * (self._used + 1) > len(self._table):
            self._grow()
        table, mask = self._table, self._mask
        at = hash(product_id) & mask
        while table[at] >= 0:
            at = (at + 1) & mask
        if table[at] == EMPTY:
            self._used += 1
        table[at] = slot

    def drop(self, product_id: str) -> None:
        wanted = product_id.encode()
        table, mask, ids = self._table, self._mask, self._ids
        at = hash(product_id) & mask
        while (slot := table[at]) != EMPTY:
            if slot != GONE and ids.get(slot) == wanted:
                table[at] = GONE
                return
            at = (at + 1) & mask

    def _grow(self) -> None:
        live = [slot for slot in self._table if slot >= 0]
        size = len(self._table)
        while size < 4 * len(live) + 2:
            size *= 2
        self._table = array("i", [EMPTY]) * size
        self._mask = size - 1
        self._used = 0
        for slot in live:
            self.add(self._ids.text(slot), slot)
