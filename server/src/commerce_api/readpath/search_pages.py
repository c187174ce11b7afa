"""A page of a search's matches in a sort's order, from the in-memory catalogue: the matches
of the in-memory search (``search_window``), or the ids the database's full-text index found
while that search is being built (``ids_window``)."""

from __future__ import annotations

from collections.abc import Iterable

from commerce_api.readpath.catalog_index import CatalogIndex
from commerce_api.readpath.search_index import Matches
from commerce_api.readpath.slot_order import SlotOrder


def ids_window(
    index: CatalogIndex,
    ids: Iterable[str],
    category: str | None,
    sort: str,
    limit: int,
    offset: int,
) -> tuple[list[int], int]:
    """A page of the slots of ``ids`` (a search's matches) in ``sort`` order, and their
    number; ids it does not hold (archived, or made since) are left out."""
    find = index.by_id.find
    slots = [slot for slot in map(find, ids) if slot is not None]
    if category is not None:
        code = index.category_code(category)
        slots = [slot for slot in slots if index.category[slot] == code]
    return _sorted(index, slots, sort, limit, offset), len(slots)


def search_window(
    index: CatalogIndex, matches: Matches, category: str | None, sort: str, limit: int, offset: int
) -> tuple[list[int], int]:
    """A page of a search's ``matches`` in ``sort`` order, and their number.

    A page near the start is found by walking the sort's order and keeping the matched slots
    (for a word in 5 % of the catalogue, 20 items cost ~400 tests); a deep one by sorting the
    matches — whichever is expected to cost less. Within a category, a bitmap of matches is
    and-ed with the category's bitmap; a set of them is filtered."""
    code = None if category is None else index.category_code(category)
    order = index.orders.get((code, sort.removeprefix("-")))
    if order is None:
        return [], 0
    slots: list[int] | None = None
    if code is not None and isinstance(matches.built, int):
        changed = {slot for slot in matches.changed if index.category[slot] == code}
        matches = Matches(matches.built & index.category_bits(code), changed)
    elif code is not None:
        slots = [slot for slot in matches.slots() if index.category[slot] == code]
    total = len(matches) if slots is None else len(slots)
    need = offset + limit
    if total == 0 or offset >= total:
        return [], total
    if need * len(order) <= 4 * total * total + 4096 * total:
        return _walk(order, matches, offset, need, sort.startswith("-")), total
    if slots is None:
        slots = matches.slots()
    return _sorted(index, slots, sort, limit, offset), total


def _sorted(index: CatalogIndex, slots: list[int], sort: str, limit: int, offset: int) -> list[int]:
    """The page at ``offset`` of ``slots`` in ``sort`` order (sorted in place)."""
    slots.sort(key=index.rank.__getitem__)
    key = sort.removeprefix("-")
    if key == "price":
        slots.sort(key=index.price.__getitem__)  # stable: ties in creation order
    elif key == "name":
        slots.sort(key=index.names.get)
    if sort.startswith("-"):
        end = max(len(slots) - offset, 0)
        return slots[max(end - limit, 0) : end][::-1]
    return slots[offset : offset + limit]


def _walk(order: SlotOrder, matches: Matches, offset: int, need: int, reverse: bool) -> list[int]:
    """The matched slots at positions ``offset`` .. ``need`` of ``order``'s matched ones."""
    built, changed = matches.member()
    found: list[int] = []
    if isinstance(built, bytes):
        end = len(built) * 8
        for block in order.blocks(reverse):
            found += [
                s for s in block if (s < end and built[s >> 3] >> (s & 7) & 1) or s in changed
            ]
            if len(found) >= need:
                break
    else:
        for block in order.blocks(reverse):
            found += [s for s in block if s in built or s in changed]
            if len(found) >= need:
                break
    return found[offset:need]
