"""An ordered sequence of product slots with positional access: the k-th item in O(log n).

The catalogue keeps each product's fields in columns indexed by a slot number
(``readpath.columns``); an order (by price, by name, …) is a sequence of slots sorted by a key
that the columns give. ``SlotOrder`` keeps it as sortedcontainers' ``SortedKeyList`` does — a
list of sorted blocks of about a thousand items, the last key of each block, and the blocks'
cumulative lengths for the positions — but stores the slots in compact ``array('i')`` blocks
and keeps no key per item: a key is computed from the columns when a bisection needs it.
``SortedKeyList`` keeps a Python key object beside every item; at a million products, three
orders overall and per category, that alone is several hundred megabytes, past the worker's
memory budget (docs/catalogue.md). The structure and its costs are the same:
adding or removing a slot costs O(log n) comparisons plus a copy inside one block; a window
of ``limit`` items at any offset costs O(log n + limit).

Keys must be unique (the catalogue's end in the product's creation order, which is unique).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from typing import Any

LOAD = 1024  # a block's length after a split; blocks are split at twice this


class SlotOrder:
    __slots__ = ("_blocks", "_key", "_len", "_maxes", "_offsets")

    def __init__(self, key: Callable[[int], Any]) -> None:
        self._key = key
        self._blocks: list[array[int]] = []
        self._maxes: list[Any] = []  # the key of each block's last slot
        self._len = 0
        self._offsets: list[int] | None = None  # each block's first position (None: to redo)

    @classmethod
    def loaded(cls, key: Callable[[int], Any], slots: Iterable[int]) -> SlotOrder:
        """An order of ``slots``, which are already in ``key`` order."""
        order = cls(key)
        items = array("i", slots)
        order._blocks = [items[at : at + LOAD] for at in range(0, len(items), LOAD)]
        order._maxes = [key(block[-1]) for block in order._blocks]
        order._len = len(items)
        return order

    def __len__(self) -> int:
        return self._len

    def __getstate__(self) -> tuple[list[array[int]], list[Any], int]:
        """Pickled without its key (a function of the columns): ``keyed`` gives it back."""
        return self._blocks, self._maxes, self._len

    def __setstate__(self, state: tuple[list[array[int]], list[Any], int]) -> None:
        self._blocks, self._maxes, self._len = state
        self._offsets = None

    def keyed(self, key: Callable[[int], Any]) -> None:
        """Give an unpickled order its key back (the same key it was built with)."""
        self._key = key

    def add(self, slot: int) -> None:
        key = self._key(slot)
        blocks, maxes = self._blocks, self._maxes
        self._len += 1
        self._offsets = None
        if not blocks:
            blocks.append(array("i", (slot,)))
            maxes.append(key)
            return
        at = bisect_left(maxes, key)
        if at == len(blocks):  # after every slot: the end of the last block
            at -= 1
            blocks[at].append(slot)
            maxes[at] = key
        else:
            block = blocks[at]
            block.insert(bisect_left(block, key, key=self._key), slot)
        block = blocks[at]
        if len(block) > 2 * LOAD:
            blocks[at : at + 1] = [block[:LOAD], block[LOAD:]]
            maxes.insert(at, self._key(block[LOAD - 1]))

    def remove(self, slot: int) -> bool:
        """Take ``slot`` out (its key as the columns give it now: call this before they
        change); False when it is not here."""
        key = self._key(slot)
        blocks, maxes = self._blocks, self._maxes
        at = bisect_left(maxes, key)
        if at == len(blocks):
            return False
        block = blocks[at]
        index = bisect_left(block, key, key=self._key)
        if index == len(block) or block[index] != slot:
            return False
        del block[index]
        self._len -= 1
        self._offsets = None
        if not block:
            del blocks[at], maxes[at]
        elif index == len(block):
            maxes[at] = self._key(block[-1])
        return True

    def last(self) -> int | None:
        return self._blocks[-1][-1] if self._blocks else None

    def neighbours(self, value: Any, key: Callable[[int], Any]) -> tuple[int | None, int | None]:
        """The slots just before and just after where ``value`` would go; ``key`` must sort
        the slots as this order's own key does (another spelling of it, say from other
        columns)."""
        position = self._position(value, key)
        before = self.window(position - 1, 1) if position > 0 else []
        after = self.window(position, 1)
        return (before[0] if before else None, after[0] if after else None)

    def _position(self, value: Any, key: Callable[[int], Any]) -> int:
        blocks = self._blocks
        at = bisect_left(blocks, value, key=lambda block: key(block[-1]))
        if at == len(blocks):
            return self._len
        return self._starts()[at] + bisect_left(blocks[at], value, key=key)

    def window(self, offset: int, limit: int, reverse: bool = False) -> list[int]:
        """The slots at positions ``offset`` .. ``offset + limit`` (``reverse``: counted from
        the end, last first)."""
        if reverse:
            end = max(self._len - offset, 0)
            start = max(end - limit, 0)
        else:
            start, end = offset, min(offset + limit, self._len)
        if start >= end:
            return []
        starts = self._starts()
        at = bisect_right(starts, start) - 1
        found: list[int] = []
        index = start - starts[at]
        while len(found) < end - start:
            block = self._blocks[at]
            found.extend(block[index : index + (end - start - len(found))])
            at, index = at + 1, 0
        if reverse:
            found.reverse()
        return found

    def blocks(self, reverse: bool = False) -> Iterator[array[int]]:
        """The slots a block at a time, first to last (``reverse``: last to first, each block
        reversed)."""
        if reverse:
            for block in reversed(self._blocks):
                yield block[::-1]
        else:
            yield from self._blocks

    def __iter__(self) -> Any:
        for block in self._blocks:
            yield from block

    def _starts(self) -> list[int]:
        if self._offsets is None:
            self._offsets = [0, *accumulate(len(block) for block in self._blocks)][:-1]
        return self._offsets
