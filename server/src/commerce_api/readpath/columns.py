"""Compact columns for the in-memory catalogue: a million products' ids and names in a few
tens of megabytes, where a Python ``str`` per value (and a ``dict`` from id to slot) would take
over 150 MB (docs/catalogue.md).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate


class TextColumn:
    """Texts by slot, as UTF-8 in one growing buffer. A value's bytes compare as the text
    does by code point (UTF-8 keeps that order), so orders by name compare them as they are.

    While every value has the same length (product ids: ``core.ids`` makes them so) the
    buffer is all there is — value ``slot`` is at ``slot * width`` — and a change is written
    in place; the first value of another length gives each value its start and length (4
    bytes each, up to 4 GiB of text), and a changed value is then appended: the old bytes
    stay until the catalogue is built again."""

    __slots__ = ("_buffer", "_count", "_lengths", "_starts", "_width")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._count = 0
        self._width: int | None = None  # every value's length, while they share one
        self._starts = array("I")  # each value's, once they do not
        self._lengths = array("I")

    def append(self, text: str) -> None:
        self.extend((text,))

    def extend(self, texts: Iterable[str]) -> list[bytes]:
        """Append ``texts``; their UTF-8 bytes."""
        encoded = [text.encode() for text in texts]
        if not encoded:
            return encoded
        if self._count == 0:
            self._width = len(encoded[0])
        width = self._width
        if width is not None and all(len(value) == width for value in encoded):
            self._buffer += b"".join(encoded)
            self._count += len(encoded)
            return encoded
        starts, lengths = self._spread()
        found = array("I", map(len, encoded))
        starts.extend(accumulate(found, initial=len(self._buffer)))
        starts.pop()  # the end of the last one
        lengths.extend(found)
        self._buffer += b"".join(encoded)
        self._count += len(encoded)
        return encoded

    def _spread(self) -> tuple[array[int], array[int]]:
        """Each value's start and length (the end of the shared width)."""
        width = self._width
        if width is not None:
            starts = range(0, self._count * width, width) if width else [0] * self._count
            self._starts = array("I", starts)
            self._lengths = array("I", [width]) * self._count
            self._width = None
        return self._starts, self._lengths

    def set(self, slot: int, text: str) -> None:
        encoded = text.encode()
        if encoded == self.get(slot):
            return
        width = self._width
        if width is not None and len(encoded) == width:
            self._buffer[slot * width : (slot + 1) * width] = encoded
            return
        starts, lengths = self._spread()
        starts[slot] = len(self._buffer)
        lengths[slot] = len(encoded)
        self._buffer += encoded

    def get(self, slot: int) -> bytes:
        width = self._width
        if width is not None:
            return bytes(self._buffer[slot * width : (slot + 1) * width])
        start = self._starts[slot]
        return bytes(self._buffer[start : start + self._lengths[slot]])

    def text(self, slot: int) -> str:
        return self.get(slot).decode()

    def __len__(self) -> int:
        return self._count


class IdTable:
    """Slot by product id. The slots a build found are kept sorted by their ids (the ids
    column's bytes, which order as the texts do): a bisection over them compares ids. Ids added
    since are in a dict; dropped ones are remembered by slot (a slot is never reused).

    A build's slots come in list order, which is nearly always id order too (an id begins with
    its creation time: ``core.ids``), so sorting them is a pass that finds them in order."""

    __slots__ = ("_added", "_dropped", "_ids", "_slots")

    def __init__(self, ids: TextColumn, keys: Sequence[bytes] = ()) -> None:
        """``keys``: each slot's id's bytes, for every slot of ``ids``."""
        self._ids = ids
        self._added: dict[str, int] = {}
        self._dropped: set[int] = set()
        self._slots = array("i", sorted(range(len(keys)), key=keys.__getitem__))

    def find(self, product_id: str) -> int | None:
        slot = self._added.get(product_id)
        if slot is not None:
            return slot
        return self._built(product_id)

    def _built(self, product_id: str) -> int | None:
        wanted = product_id.encode()
        slots, get = self._slots, self._ids.get
        at = bisect_left(slots, wanted, key=get)
        if at == len(slots):
            return None
        slot = slots[at]
        if slot in self._dropped or get(slot) != wanted:
            return None
        return slot

    def add(self, product_id: str, slot: int) -> None:
        """Add ``slot`` (not here yet) under ``product_id``."""
        self._added[product_id] = slot

    def drop(self, product_id: str) -> None:
        if self._added.pop(product_id, None) is None:
            slot = self._built(product_id)
            if slot is not None:
                self._dropped.add(slot)
