"""The in-memory search against a brute-force model.

A catalogue index is built from random products, its search built over its slots, then random
changes (new products, renames, new descriptions, price edits, archives, restores) are applied
to both; after every change each search — one word or two, whole words and prefixes, every
sort, overall and per category, several offsets — must give the very slots and total that
filtering and sorting the model's products gives.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from commerce_api.readpath import search_index
from commerce_api.readpath.catalog_index import CatalogIndex
from commerce_api.readpath.columns import IdTable, TextColumn
from commerce_api.readpath.rows import KeyColumns, KeyRow, micros
from commerce_api.readpath.search_index import build_search, words_of
from commerce_api.readpath.search_pages import search_window

WORDS = ("usb", "us", "user", "cable", "café", "x1", "x10", "x2", "Über", "lamp")
QUERIES = (["usb"], ["us"], ["u"], ["x1"], ["x"], ["cable", "us"], ["café"], ["über"], ["zz"])
CATEGORIES = ("books", "toys", "café")
SORTS = ("created_at", "-created_at", "price", "-price", "name", "-name")
T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)

texts = st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)
products = st.tuples(texts, texts, st.integers(0, 9), st.integers(0, 2))
changes = st.lists(
    st.tuples(
        st.sampled_from(["new", "name", "description", "price", "archive", "restore"]),
        st.integers(0, 1000),
        products,
    ),
    max_size=25,
)


class Model:
    """Every product as the change feed would say it now."""

    def __init__(self) -> None:
        self.rows: dict[str, KeyRow] = {}
        self.order: list[str] = []

    def put(self, row: KeyRow) -> None:
        if row.id not in self.rows:
            self.order.append(row.id)
        self.rows[row.id] = row

    def expected(
        self, words: list[str], category: str | None, sort: str, offset: int, limit: int
    ) -> tuple[list[str], int]:
        found = [
            row
            for row in self.rows.values()
            if row.archived_at is None
            and (category is None or row.category == category)
            and all(
                any(held.startswith(word) for held in words_of(row.name, row.description))
                for word in words
            )
        ]
        key = sort.removeprefix("-")

        def order(row: KeyRow) -> tuple[object, ...]:
            first: tuple[object, ...] = ()
            if key == "price":
                first = (row.price_minor,)
            elif key == "name":
                first = (row.name.encode(),)
            return (*first, row.created_at, row.id.encode())

        found.sort(key=order, reverse=sort.startswith("-"))
        return [row.id for row in found[offset : offset + limit]], len(found)


def _row(number: int, text: tuple[str, str, int, int], archived: bool = False) -> KeyRow:
    name, description, price, category = text
    return KeyRow(
        id=f"prod_{number:06d}",
        name=f"{name} {number}",
        price_minor=price,
        category=CATEGORIES[category],
        created_at=T0 + timedelta(seconds=number),
        archived_at=T0 if archived else None,
        description=description,
    )


def built(rows: list[KeyRow]) -> CatalogIndex:
    """The catalogue index a build makes of ``rows`` (in creation order)."""
    index = CatalogIndex(0)
    if rows:
        index.extend(
            KeyColumns(
                [row.id for row in rows],
                [row.name for row in rows],
                [row.price_minor for row in rows],
                [row.category for row in rows],
                [micros(row.created_at) for row in rows],
            )
        )
    index.finish()
    return index


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(
    start=st.lists(products, max_size=40),
    plan=changes,
    dense=st.sampled_from([2, 32]),
    offsets=st.lists(st.integers(0, 12), min_size=1, max_size=2),
)
def test_searches_match_the_model(
    start: list[tuple[str, str, int, int]],
    plan: list[tuple[str, int, tuple[str, str, int, int]]],
    dense: int,
    offsets: list[int],
) -> None:
    search_index.DENSE_SHARE = dense  # 2: most words a bitmap; 32: most a list of slots
    try:
        model = Model()
        rows = [_row(number, text) for number, text in enumerate(start)]
        for row in rows:
            model.put(row)
        index = built(rows)
        # The search is built from texts read before some changes (archived products among
        # them), then those changes are applied again, as a catch-up does after a build.
        texts = [(slot, row.name, row.description) for slot, row in enumerate(rows)]
        half = len(plan) // 2
        applied = [_apply(index, model, kind, pick, text) for kind, pick, text in plan[:half]]
        index.attach(build_search(len(index.ids), texts))
        for row in applied:
            index.apply(row)
        # ... and the rest after.
        for kind, pick, text in plan[half:]:
            _apply(index, model, kind, pick, text)
            _check(index, model, offsets)
        _check(index, model, offsets)
    finally:
        search_index.DENSE_SHARE = 32


def _apply(
    index: CatalogIndex, model: Model, kind: str, pick: int, text: tuple[str, str, int, int]
) -> KeyRow:
    if kind == "new" or not model.order:
        row = _row(len(model.order) + 100, text)
    else:
        old = model.rows[model.order[pick % len(model.order)]]
        name, description, price, _ = text
        if kind == "name":
            row = old._replace(name=f"{name} {pick}")
        elif kind == "description":
            row = old._replace(description=description)
        elif kind == "price":
            row = old._replace(price_minor=price)
        elif kind == "archive":
            row = old._replace(archived_at=T0)
        else:
            row = old._replace(archived_at=None)
    model.put(row)
    index.apply(row)
    return row


def _check(index: CatalogIndex, model: Model, offsets: list[int]) -> None:
    assert index.search is not None
    for words in QUERIES:
        matches = index.search.matches(words)
        for category in (None, *CATEGORIES):
            for sort in SORTS:
                for offset in offsets:
                    slots, total = search_window(index, matches, category, sort, 5, offset)
                    found = [index.ids.text(slot) for slot in slots]
                    assert (found, total) == model.expected(words, category, sort, offset, 5), (
                        words,
                        category,
                        sort,
                        offset,
                    )


def test_a_deep_page_and_a_first_one_agree_with_a_sort() -> None:
    """The walk (a page near the start) and the sort (a deep one) give the same order."""
    model = Model()
    rows = [_row(n, ("usb" if n % 3 else "lamp", "", n % 7, n % 3)) for n in range(3000)]
    for row in rows:
        model.put(row)
    index = built(rows)
    index.attach(build_search(3000, [(slot, row.name, "") for slot, row in enumerate(rows)]))
    matches = index.search.matches(["usb"]) if index.search else None
    assert matches is not None
    for sort in SORTS:
        for offset in (0, 7, 1500, 1990):
            slots, total = search_window(index, matches, None, sort, 10, offset)
            assert ([index.ids.text(s) for s in slots], total) == model.expected(
                ["usb"], None, sort, offset, 10
            )


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    steps=st.lists(
        st.tuples(st.booleans(), st.integers(0, 50), st.sampled_from(["", "ab", "cd", "é", "xyz"])),
        max_size=30,
    )
)
def test_a_text_column_is_a_list_of_texts(steps: list[tuple[bool, int, str]]) -> None:
    """Values of one length kept without starts, until one of another length comes."""
    column = TextColumn()
    model: list[str] = []
    for append, pick, text in steps:
        if append or not model:
            column.extend([text, text[::-1]] if pick % 3 == 0 else [text])
            model += [text, text[::-1]] if pick % 3 == 0 else [text]
        else:
            column.set(pick % len(model), text)
            model[pick % len(model)] = text
        assert len(column) == len(model)
        assert [column.text(slot) for slot in range(len(model))] == model
        assert [column.get(slot) for slot in range(len(model))] == [t.encode() for t in model]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    ids=st.lists(st.text("abcdé", min_size=1, max_size=4), unique=True, max_size=40),
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=20),
)
def test_an_id_table_finds_every_slot_by_its_id(
    ids: list[str], steps: list[tuple[bool, int]]
) -> None:
    """A build's ids in any order (not only id order), then some dropped and others added."""
    column = TextColumn()
    table = IdTable(column, column.extend(ids))
    model = {product_id: slot for slot, product_id in enumerate(ids)}
    for add, pick in steps:
        if add:
            product_id = f"new{pick}"
            if product_id not in model:
                column.append(product_id)
                model[product_id] = len(column) - 1
                table.add(product_id, model[product_id])
        elif model:
            product_id = sorted(model)[pick % len(model)]
            table.drop(product_id)
            del model[product_id]
        for product_id in [*ids, *(f"new{n}" for n in range(61)), "zz", ""]:
            assert table.find(product_id) == model.get(product_id)
