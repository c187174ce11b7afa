"""The catalogue's orders, in memory, changed a product at a time.

Every active product has a slot: its fields in compact columns (``readpath.columns``) at that
index. Each order a list can be sorted in — by creation, price and name, overall and per
category — is a ``SlotOrder`` of slots, so a page at any offset costs O(log n + limit) and a
product's change costs O(log n) per order: it is taken out of every order under its old
fields and put back under its new ones. Each reversed sort (``-price``) reads its order
backwards, ties included (the database's ``ORDER BY price DESC, created_at DESC, id DESC``).

Creation order is kept as one integer per slot (``rank``), with gaps, so that every order's
key is a few integers: a product created between two others (a clock behind another host's)
takes a rank between theirs; only when no integer is left there are the ranks renumbered.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from typing import Any

from commerce_api.readpath.columns import IdTable, TextColumn
from commerce_api.readpath.rows import KeyColumns, KeyRow, micros
from commerce_api.readpath.search_index import SearchIndex, bitmap
from commerce_api.readpath.slot_order import SlotOrder

SORT_KEYS = ("created_at", "price", "name")
GAP = 1 << 16  # between consecutive ranks when they are (re)numbered
CATEGORY_BITMAPS = 16  # categories kept as bitmaps for searches (125 KB each at 1M products)
PRICE_SCALE = 1 << 49  # above any rank's size: |rank| < 2**48 (2**31 slots times GAP, doubled)


class CatalogIndex:
    """The active products' orders as of change ``applied`` of the change feed."""

    def __init__(self, applied: int) -> None:
        self.applied = applied
        self.ids = TextColumn()
        self.names = TextColumn()
        self.created = array("q")  # microseconds since 1970
        self.rank = array("q")  # place in creation order (see the module's docstring)
        self.price = array("q")
        self.category = array("i")  # an index into category_names
        self.category_names: list[str] = []
        self._category_codes: dict[str, int] = {}
        self.by_id = IdTable(self.ids)
        self.orders: dict[tuple[int | None, str], SlotOrder] = {}
        self.dead: set[int] = set()  # the slots of archived products
        self._category_bitmaps: dict[int, bytearray] = {}  # a few categories' (``found``)
        self.search: SearchIndex | None = None  # its words, once built (``attach``)
        # A build's, until ``finish``: each slot's id's and name's bytes.
        self._id_keys: list[bytes] = []
        self._name_keys: list[bytes] = []

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (a build made in another process): the orders get their keys back."""
        self.__dict__.update(state)
        for (_, sort), order in self.orders.items():
            order.keyed(self.key(sort))

    # --- keys ---------------------------------------------------------------------------------

    def key(self, sort: str) -> Callable[[int], Any]:
        rank, price, names = self.rank, self.price, self.names
        if sort == "created_at":
            return rank.__getitem__
        if sort == "price":
            return lambda slot: price[slot] * PRICE_SCALE + rank[slot]
        return lambda slot: (names.get(slot), rank[slot])

    def _creation(self, slot: int) -> tuple[int, bytes]:
        return self.created[slot], self.ids.get(slot)

    # --- building -----------------------------------------------------------------------------

    def append(self, row: KeyRow) -> int:
        """Give ``row`` (a product not here yet) the next slot, its columns set and found by
        id (its rank is the caller's)."""
        slot = len(self.created)
        self.ids.append(row.id)
        self.names.append(row.name)
        self.created.append(micros(row.created_at))
        self.price.append(row.price_minor)
        self.category.append(self._code(row.category))
        self.rank.append(slot * GAP)
        self.by_id.add(row.id, slot)
        return slot

    def extend(self, columns: KeyColumns) -> None:
        """Append a partition of products (a build's, in creation order): their columns, and
        ranks in that order. Found by id and ordered once every one is in (``finish``)."""
        ids, names, prices, categories, created = columns
        start = len(self.created)
        self._id_keys += self.ids.extend(ids)
        self._name_keys += self.names.extend(names)
        self.price.extend(prices)
        self.created.extend(created)
        for category in set(categories):
            self._code(category)
        self.category.extend(map(self._category_codes.__getitem__, categories))
        self.rank.extend(range(start * GAP, (start + len(ids)) * GAP, GAP))

    def finish(self) -> None:
        """Every slot found by its id, and every order: the end of a build. Each step is a
        sort or a pass done by the standard library's C code, never a Python loop over the
        products (a million of them: ~1 s a loop)."""
        self.by_id = IdTable(self.ids, self._id_keys)
        count = len(self.created)
        by_creation = range(count)
        # Stable sorts of slots in creation order: ties stay in creation order.
        orders = {
            "created_at": by_creation,
            "price": sorted(by_creation, key=self.price.__getitem__),
            "name": sorted(by_creation, key=self._name_keys.__getitem__),
        }
        self._id_keys, self._name_keys = [], []
        counts = sorted(Counter(self.category).items())
        for sort, slots in orders.items():
            key = self.key(sort)
            self.orders[None, sort] = SlotOrder.loaded(key, slots)
            # Stable: each category's slots stay in this order.
            grouped = sorted(slots, key=self.category.__getitem__)
            start = 0
            for code, size in counts:
                self.orders[code, sort] = SlotOrder.loaded(key, grouped[start : start + size])
                start += size

    # --- changes ------------------------------------------------------------------------------

    def apply(self, row: KeyRow) -> None:
        """Bring one product to what the change feed says of it (idempotent)."""
        slot = self.by_id.find(row.id)
        if slot is not None:
            self._take_out(slot)
            if row.archived_at is not None:
                self.by_id.drop(row.id)  # the slot is dead: restored, it gets a new one
                self.dead.add(slot)
                if self.search is not None:
                    self.search.drop(slot)
                return
            self.names.set(slot, row.name)
            self.price[slot] = row.price_minor
            self.category[slot] = self._code(row.category)
        elif row.archived_at is not None:
            return
        else:
            slot = self.append(row)
            self.rank[slot] = self._new_rank(slot)
        self._put_in(slot)
        if self.search is not None:
            self.search.update(slot, row.name, row.description)

    def attach(self, search: SearchIndex) -> None:
        """Search with ``search`` from now on: built over this index's slots (as of a change
        the caller applies again after this), without the slots archived since."""
        for slot in self.dead:
            search.drop(slot)
        self.search = search

    def _new_rank(self, slot: int) -> int:
        """A rank for a new product, between those of its neighbours in creation order."""
        overall = self.orders.get((None, "created_at"))
        last = None if overall is None else overall.last()
        if overall is None or last is None:
            return slot * GAP
        creation = self._creation(slot)
        if creation > self._creation(last):
            return self.rank[last] + GAP
        before, after = overall.neighbours(creation, self._creation)
        low = -GAP if before is None else self.rank[before]
        high = self.rank[after] if after is not None else low + 2 * GAP
        if high - low > 1:
            return (low + high) // 2
        self._renumber()
        return self._new_rank(slot)

    def _renumber(self) -> None:
        """New ranks, GAP apart, in creation order; every order's keys move alike, so each
        stays sorted, and only the keys it kept per block are taken again."""
        for place, slot in enumerate(self.orders[None, "created_at"]):
            self.rank[slot] = (place + 1) * GAP
        rebuilt = {}
        for (code, sort), order in self.orders.items():
            rebuilt[code, sort] = SlotOrder.loaded(self.key(sort), list(order))
        self.orders = rebuilt

    def category_bits(self, code: int) -> int:
        """The category's slots as a bitmap (kept for the last few categories asked, and
        changed with them)."""
        bits = self._category_bitmaps.get(code)
        if bits is None:
            if len(self._category_bitmaps) >= CATEGORY_BITMAPS:
                self._category_bitmaps.clear()
            slots = self.orders[code, "created_at"]
            bits = self._category_bitmaps[code] = bitmap(slots, len(self.created))
        return int.from_bytes(bits, "little")

    def _category_bit(self, code: int, slot: int, on: bool) -> None:
        bits = self._category_bitmaps.get(code)
        if bits is None:
            return
        if slot >> 3 >= len(bits):
            bits.extend(bytes((slot >> 3) + 1 - len(bits)))
        if on:
            bits[slot >> 3] |= 1 << (slot & 7)
        else:
            bits[slot >> 3] &= ~(1 << (slot & 7))

    def _take_out(self, slot: int) -> None:
        code = self.category[slot]
        self._category_bit(code, slot, False)
        for sort in SORT_KEYS:
            self.orders[None, sort].remove(slot)
            self.orders[code, sort].remove(slot)

    def _put_in(self, slot: int) -> None:
        code = self.category[slot]
        self._category_bit(code, slot, True)
        for sort in SORT_KEYS:
            for name in (None, code):
                order = self.orders.get((name, sort))
                if order is None:
                    order = self.orders[name, sort] = SlotOrder(self.key(sort))
                order.add(slot)

    def _code(self, category: str) -> int:
        code = self._category_codes.get(category)
        if code is None:
            code = self._category_codes[category] = len(self.category_names)
            self.category_names.append(category)
        return code

    # --- reads --------------------------------------------------------------------------------

    def window(
        self, category: str | None, sort: str, offset: int, limit: int
    ) -> tuple[list[int], int]:
        """A page's slots and the number of products in its list."""
        code = None if category is None else self._category_codes.get(category, -1)
        order = self.orders.get((code, sort.removeprefix("-")))
        if order is None:
            return [], 0
        return order.window(offset, limit, sort.startswith("-")), len(order)

    def category_code(self, category: str, missing: int = -1) -> int:
        """The code of ``category`` (``missing`` for one no product has had)."""
        return self._category_codes.get(category, missing)

    def categories(self) -> list[tuple[str, int]]:
        """Each category with active products and how many, by name (code point order)."""
        counts = (
            (self.category_names[code], len(order))
            for (code, sort), order in self.orders.items()
            if code is not None and sort == "created_at" and len(order)
        )
        return sorted(counts)
