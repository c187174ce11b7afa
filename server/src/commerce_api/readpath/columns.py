"""Compact columns for the in-memory catalogue: a million products' ids and names in a few
tens of megabytes, where a Python ``str`` per value (and a ``dict`` from id to slot) would take
over 150 MB (docs/catalogue.md).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable
from itertools import accumulate
from zlib import crc32


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

    def extend(self, texts: Iterable[str]) -> list[bytes]:
        """Append ``texts``; their UTF-8 bytes."""
        encoded = [text.encode() for text in texts]
        lengths = array("i", map(len, encoded))
        self._starts.extend(accumulate(lengths, initial=len(self._buffer)))
        self._starts.pop()  # the end of the last one
        self._lengths.extend(lengths)
        self._buffer += b"".join(encoded)
        return encoded

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
    """Slot by product id. The ids a build found are two arrays sorted by the CRC-32 of the
    id: a bisection finds the hash, and the few slots that have it compare their ids. Ids
    added since are in a dict; dropped ones are remembered by slot (a slot is never reused).
    CRC-32, not Python's ``hash``: that is seeded per process, and a build made in another
    process (``index_build``) is used in this one."""

    __slots__ = ("_added", "_dropped", "_hashes", "_ids", "_slots")

    def __init__(self, ids: TextColumn, hashes: array[int] | None = None) -> None:
        """``hashes``: each slot's id's CRC-32, for every slot of ``ids``."""
        self._ids = ids
        self._added: dict[str, int] = {}
        self._dropped: set[int] = set()
        hashes = array("I") if hashes is None else hashes
        order = sorted(range(len(hashes)), key=hashes.__getitem__)
        self._slots = array("i", order)
        self._hashes = array("I", map(hashes.__getitem__, order))

    def find(self, product_id: str) -> int | None:
        slot = self._added.get(product_id)
        if slot is not None:
            return slot
        return self._built(product_id)

    def _built(self, product_id: str) -> int | None:
        wanted = product_id.encode()
        hashed = crc32(wanted)
        hashes, slots, ids = self._hashes, self._slots, self._ids
        at = bisect_left(hashes, hashed)
        while at < len(hashes) and hashes[at] == hashed:
            slot = slots[at]
            if slot not in self._dropped and ids.get(slot) == wanted:
                return slot
            at += 1
        return None

    def add(self, product_id: str, slot: int) -> None:
        """Add ``slot`` (not here yet) under ``product_id``."""
        self._added[product_id] = slot

    def drop(self, product_id: str) -> None:
        if self._added.pop(product_id, None) is None:
            slot = self._built(product_id)
            if slot is not None:
                self._dropped.add(slot)
