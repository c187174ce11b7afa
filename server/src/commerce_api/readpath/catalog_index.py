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
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from commerce_api.readpath.columns import IdTable, TextColumn
from commerce_api.readpath.reader import KeyRow
from commerce_api.readpath.slot_order import SlotOrder

SORT_KEYS = ("created_at", "price", "name")
GAP = 1 << 16  # between consecutive ranks when they are (re)numbered
PRICE_SCALE = 1 << 49  # above any rank's size: |rank| < 2**48 (2**31 slots times GAP, doubled)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND


class CatalogIndex:
    """The active products' orders as of change ``applied`` of the change feed."""

    def __init__(self, capacity: int, applied: int) -> None:
        self.applied = applied
        self.ids = TextColumn()
        self.names = TextColumn()
        self.created = array("q")  # microseconds since 1970
        self.rank = array("q")  # place in creation order (see the module's docstring)
        self.price = array("q")
        self.category = array("i")  # an index into category_names
        self.category_names: list[str] = []
        self._category_codes: dict[str, int] = {}
        self.by_id = IdTable(self.ids, capacity)
        self.orders: dict[tuple[int | None, str], SlotOrder] = {}

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

    def append(self, row: KeyRow, indexed: bool = True) -> int:
        """Give ``row`` (a product not here yet) the next slot, its columns set (its rank
        is the caller's); found by id unless not ``indexed`` (a build's: ``index_ids``)."""
        slot = len(self.created)
        self.ids.append(row.id)
        self.names.append(row.name)
        self.created.append(micros(row.created_at))
        self.price.append(row.price_minor)
        self.category.append(self._code(row.category))
        self.rank.append(slot * GAP)
        if indexed:
            self.by_id.add(row.id, slot)
        return slot

    def index_ids(self) -> None:
        """Find every slot by its id (after a build's appends)."""
        self.by_id = IdTable(self.ids, len(self.created))
        for slot in range(len(self.created)):
            self.by_id.add(self.ids.text(slot), slot)

    def load_orders(self) -> None:
        """Every order, from slots appended in creation order (a build's)."""
        count = len(self.created)
        by_creation = range(count)
        # Stable sorts of slots in creation order: ties stay in creation order.
        orders = {
            "created_at": by_creation,
            "price": sorted(by_creation, key=self.price.__getitem__),
            "name": sorted(by_creation, key=self.names.get),
        }
        for sort, slots in orders.items():
            key = self.key(sort)
            self.orders[None, sort] = SlotOrder.loaded(key, slots)
            per_category: dict[int, array[int]] = {}
            category = self.category
            for slot in slots:
                code = category[slot]
                found = per_category.get(code)
                if found is None:
                    found = per_category[code] = array("i")
                found.append(slot)
            for code, ordered in per_category.items():
                self.orders[code, sort] = SlotOrder.loaded(key, ordered)

    # --- changes ------------------------------------------------------------------------------

    def apply(self, row: KeyRow) -> None:
        """Bring one product to what the change feed says of it (idempotent)."""
        slot = self.by_id.find(row.id)
        if slot is not None:
            self._take_out(slot)
            if row.archived_at is not None:
                self.by_id.drop(row.id)  # the slot is dead: restored, it gets a new one
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

    def _take_out(self, slot: int) -> None:
        code = self.category[slot]
        for sort in SORT_KEYS:
            self.orders[None, sort].remove(slot)
            self.orders[code, sort].remove(slot)

    def _put_in(self, slot: int) -> None:
        code = self.category[slot]
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

    def categories(self) -> list[tuple[str, int]]:
        """Each category with active products and how many, by name (code point order)."""
        counts = (
            (self.category_names[code], len(order))
            for (code, sort), order in self.orders.items()
            if code is not None and sort == "created_at" and len(order)
        )
        return sorted(counts)

    def matches(
        self, ids: Iterable[str], category: str | None, sort: str, limit: int, offset: int
    ) -> tuple[list[int], int]:
        """A page of the slots of ``ids`` (a search's matches) in ``sort`` order, and their
        number; ids it does not hold (archived, or made since) are left out."""
        find = self.by_id.find
        slots = [slot for slot in map(find, ids) if slot is not None]
        if category is not None:
            code = self._category_codes.get(category, -1)
            slots = [slot for slot in slots if self.category[slot] == code]
        slots.sort(key=self.rank.__getitem__)
        key = sort.removeprefix("-")
        if key == "price":
            slots.sort(key=self.price.__getitem__)  # stable: ties in creation order
        elif key == "name":
            slots.sort(key=self.names.get)
        if sort.startswith("-"):
            end = max(len(slots) - offset, 0)
            return slots[max(end - limit, 0) : end][::-1], len(slots)
        return slots[offset : offset + limit], len(slots)
