"""The in-memory catalogue against the database's own answer.

``SlotOrder`` against a sorted Python list (any key, any offset, either direction). Then, on
both backends, Hypothesis drives random interleavings of catalogue writes — creates (some with
a creation time between two others'), price and name and category changes, archives, restores,
a rebuild's worth of writes — and reads from two read paths (two sets of connections, as two
processes have); after every step each page (every sort, overall and per category, several
offsets), the category list and a search must be the very bytes the database path gives.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commerce_api.catalog import repository
from commerce_api.catalog import service as catalog_service
from commerce_api.core.ids import new_id
from commerce_api.core.pagination import page
from commerce_api.readpath import catalog_cache, change_feed
from commerce_api.readpath.service import ReadPath
from commerce_api.readpath.slot_order import SlotOrder
from commerce_api.storage.db import Database

SORTS = ("created_at", "-created_at", "price", "-price", "name", "-name")
# The in-memory search against the database's full-text index: whole words, prefixes, two
# words, a description's word (renames change names only; "describe" the description).
SEARCHES = (
    (["widget"], None, "created_at", 0),
    (["p1"], None, "-price", 0),
    (["n"], "toys", "name", 1),
    (["about", "n1"], None, "-name", 0),
    (["gadget"], None, "price", 2),
    (["café"], "café", "-created_at", 0),
)
CATEGORIES = ("books", "toys", "café")
T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)


# --- SlotOrder ---------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    operations=st.lists(st.tuples(st.booleans(), st.integers(0, 300)), max_size=400),
    probes=st.lists(
        st.tuples(st.integers(0, 320), st.integers(1, 40), st.booleans()), min_size=1, max_size=10
    ),
)
def test_a_slot_order_is_a_sorted_list_with_positions(
    operations: list[tuple[bool, int]], probes: list[tuple[int, int, bool]]
) -> None:
    keys = [random.Random(slot).random() for slot in range(301)]  # a key per slot
    order = SlotOrder(keys.__getitem__)
    model: set[int] = set()
    for add, slot in operations:
        if add and slot not in model:
            order.add(slot)
            model.add(slot)
        elif not add:
            assert order.remove(slot) == (slot in model)
            model.discard(slot)
    expected = sorted(model, key=keys.__getitem__)
    assert list(order) == expected
    assert len(order) == len(expected)
    for offset, limit, reverse in probes:
        if reverse:
            end = max(len(expected) - offset, 0)
            wanted = expected[max(end - limit, 0) : end][::-1]
        else:
            wanted = expected[offset : offset + limit]
        assert order.window(offset, limit, reverse) == wanted


def test_a_slot_order_splits_its_blocks() -> None:
    order = SlotOrder(lambda slot: -slot)  # each add goes first
    for slot in range(5000):
        order.add(slot)
    assert list(order) == list(range(4999, -1, -1))
    assert order.window(2500, 3) == [2499, 2498, 2497]
    assert order.neighbours(-17, lambda slot: -slot) == (18, 17)


# --- the index against the database -----------------------------------------------------------


@dataclass
class Step:
    kind: str
    pick: int = 0
    value: int = 0


steps = st.lists(
    st.builds(
        Step,
        kind=st.sampled_from(
            [
                "create",
                "create_between",
                "price",
                "rename",
                "describe",
                "move",
                "archive",
                "restore",
                "many",
            ]
        ),
        pick=st.integers(0, 1000),
        value=st.integers(0, 5000),
    ),
    min_size=1,
    max_size=12,
)


@dataclass
class Catalogue:
    """The products an example made (every one, archived ones too)."""

    ids: list[str] = field(default_factory=list)
    created: list[datetime] = field(default_factory=list)


def product(name: str, price: int, category: str, created: datetime) -> dict[str, Any]:
    return {
        "id": new_id("prod"),
        "name": name,
        "description": f"About {name} widget",
        "price_minor": price,
        "category": category,
        "inventory_count": 5,
        "created_at": created,
        "updated_at": created,
        "archived_at": None,
    }


async def write(db: Database, catalogue: Catalogue, step: Step) -> None:
    """One catalogue write through the repository, in its own transaction (as a request)."""
    async with db.write() as conn:
        if step.kind in {"create", "create_between"} or not catalogue.ids:
            if step.kind == "create_between" and len(catalogue.created) > 1:
                # Between two products' creation times (a clock behind another host's), or
                # on one of them (ties broken by id).
                at = sorted(catalogue.created)[step.pick % len(catalogue.created)]
                created = at + timedelta(microseconds=step.value % 3)
            else:
                created = T0 + timedelta(seconds=len(catalogue.ids), microseconds=step.value)
            row = product(f"P{step.value}", step.value % 97, CATEGORIES[step.pick % 3], created)
            await repository.insert(conn, row)
            catalogue.ids.append(row["id"])
            catalogue.created.append(created)
            return
        target = catalogue.ids[step.pick % len(catalogue.ids)]
        now = T0 + timedelta(days=1)
        if step.kind == "price":
            await repository.update_any(conn, target, {"price_minor": step.value % 97})
        elif step.kind == "rename":
            await repository.update_any(conn, target, {"name": f"N{step.value % 13}"})
        elif step.kind == "describe":
            words = "Café gadget" if step.value % 2 else "gadgets for widgets"
            await repository.update_any(conn, target, {"description": f"{words} {step.value}"})
        elif step.kind == "move":
            await repository.update_any(conn, target, {"category": CATEGORIES[step.value % 3]})
        elif step.kind == "archive":
            await repository.archive(conn, target, now)
        elif step.kind == "restore":
            await repository.update_any(conn, target, {"archived_at": None})
        else:  # several products in one change
            for product_id in catalogue.ids[: step.value % 5 + 2]:
                await repository.update_any(conn, product_id, {"price_minor": step.value % 89})


async def check(db: Database, read_path: ReadPath, offsets: list[int]) -> None:
    versions = await read_path.tracker.current()
    assert versions is not None
    for category in (None, *CATEGORIES):
        for sort in SORTS:
            for offset in offsets:
                async with db.read() as conn:
                    expected = await catalog_service.list_products(
                        conn,
                        category=category,
                        limit=7,
                        offset=offset,
                        sort=sort,  # type: ignore[arg-type]
                    )
                found = await read_path.catalog.page(versions, category, 7, offset, sort)
                assert found is not None, "the index is built: it answers"
                assert found == orjson.dumps(expected), (category, sort, offset)
    async with db.read() as conn:
        categories = orjson.dumps(await catalog_service.list_categories(conn))
    assert await read_path.catalog.categories(versions) == categories
    for words, category, sort, offset in SEARCHES:
        total, rows = await read_path.reader.search(words, category, sort, 5, offset)
        expected_search = orjson.dumps(
            page([catalog_service.list_item(row) for row in rows], total, 5, offset)
        )
        found_search = await read_path.catalog.search(versions, words, category, sort, 5, offset)
        assert found_search == expected_search, (words, category, sort, offset)
    words = ["widget"]
    total, rows = await read_path.reader.search(words, "toys", "-price", 5, 1)
    expected_search = orjson.dumps(
        page([catalog_service.list_item(row) for row in rows], total, 5, 1)
    )
    matched = await read_path.reader.search_ids(words)
    assert (
        await read_path.catalog.search_page(versions, matched, "toys", "-price", 5, 1)
        == expected_search
    )


@pytest.fixture
async def two_read_paths(db: Database, database_url: str) -> Any:
    """Two read paths over their own connections, as two processes have."""
    other = Database(database_url)
    first = await ReadPath.open(db, "sandbox")
    second = await ReadPath.open(other, "sandbox")
    try:
        for read_path in (first, second):
            await read_path.catalog.warm(search=True)
        yield first, second
    finally:
        await first.close()
        await second.close()
        await other.dispose()


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=steps, offsets=st.lists(st.integers(0, 30), min_size=1, max_size=3))
async def test_interleaved_writes_and_reads_match_the_database(
    db: Database, two_read_paths: tuple[ReadPath, ReadPath], plan: list[Step], offsets: list[int]
) -> None:
    catalogue = Catalogue()
    builds = 0
    for step in plan:
        await write(db, catalogue, step)
        for read_path in two_read_paths:
            await check(db, read_path, offsets)
            builds += read_path.catalog._index is None
    assert builds == 0, "every change was applied, none rebuilt the index"


@pytest.mark.pgbouncer
async def test_a_large_change_builds_the_index_again(
    db: Database, two_read_paths: tuple[ReadPath, ReadPath], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up past ``REBUILD_ABOVE`` products builds anew; until then the lists are read
    from the database (None here), after it from the new index."""
    monkeypatch.setattr(change_feed, "REBUILD_ABOVE", 3)
    monkeypatch.setattr(change_feed, "FEED_PAGE", 2)
    rows = [product(f"Bulk {i}", i, "books", T0 + timedelta(seconds=i)) for i in range(6)]
    async with db.write() as conn:
        await repository.insert_many(conn, rows)
    first, _ = two_read_paths
    versions = await first.tracker.current()
    assert await first.catalog.page(versions, None, 10, 0) is None  # building again
    await first.catalog.warm()
    versions = await first.tracker.current()
    body = await first.catalog.page(versions, "books", 10, 0, "-price")
    assert body is not None
    assert [item["name"] for item in orjson.loads(body)["data"]][:2] == ["Bulk 5", "Bulk 4"]


@pytest.mark.pgbouncer
async def test_a_large_catalogue_is_built_in_a_child_process(
    db: Database, two_read_paths: tuple[ReadPath, ReadPath], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``IN_PROCESS_BELOW`` products the build runs in a spawned process and sends the
    index back, then its search the same way: the same pages and searches, the same lookups
    by id (the ids sorted, no hash seeded per process), and changes applied to them afterwards."""
    monkeypatch.setattr(catalog_cache, "IN_PROCESS_BELOW", 0)
    rows = [
        product(f"Child {i}", 97 - i, CATEGORIES[i % 3], T0 + timedelta(seconds=i))
        for i in range(9)
    ]
    async with db.write() as conn:
        await repository.insert_many(conn, rows)
    first, _ = two_read_paths
    first.catalog._forget()
    versions = await first.tracker.current()
    # While it builds, the first page comes from the database (None here) and a sorted page,
    # which would cost the database a sort of the whole catalogue, waits for the build.
    assert await first.catalog.page(versions, None, 5, 0) is None
    sorted_page = await first.catalog.page(versions, None, 5, 2, "-price")
    assert sorted_page is not None
    async with db.read() as conn:
        expected = await catalog_service.list_products(
            conn, category=None, limit=5, offset=2, sort="-price"
        )
    assert sorted_page == orjson.dumps(expected)
    # The search is built in a child process too, over the same slots.
    await first.catalog.warm(search=True)
    async with db.write() as conn:
        await repository.update_any(conn, rows[4]["id"], {"price_minor": 1, "name": "Cheapest"})
    await check(db, first, [0, 3])
    index = first.catalog._index
    assert index is not None
    assert index.by_id.find(rows[8]["id"]) is not None
