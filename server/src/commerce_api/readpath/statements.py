"""The read path's SQL: the catalogue's and the keys' own statements (``catalog/repository.py``,
``accounts/repository.py``) compiled for each driver once — the standard library's ``sqlite3``
(``?``) and asyncpg (``$1``) — at import, or a search's at its first use."""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import Select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect

from commerce_api.accounts.repository import KEY_BY_HASH
from commerce_api.catalog import search_repository
from commerce_api.catalog.repository import (
    ACTIVE_KEYS,
    ACTIVE_KEYS_AFTER,
    ACTIVE_PRODUCT,
    ACTIVE_PRODUCTS,
    ACTIVE_TEXTS,
    ACTIVE_TEXTS_AFTER,
    CHANGES,
    COUNT_ACTIVE,
    LIST_ITEMS_POSTGRESQL,
    LIST_ITEMS_SQLITE,
)
from commerce_api.storage.tables import UTCDateTime


def _compiled(statement: Select[Any], dialect: Dialect, parameters: tuple[str, ...]) -> str:
    """The statement's SQL text for ``dialect``'s driver, whose positional parameters must be
    ``parameters`` (in that order)."""
    compiled = statement.compile(dialect=dialect)
    order = tuple(compiled.positiontup or ())
    assert order == parameters, f"parameters {order}, expected {parameters}"
    return compiled.string


_SQLITE = sqlite.dialect()  # the standard library's sqlite3: `?`
_POSTGRESQL = postgresql.asyncpg.dialect()  # type: ignore[no-untyped-call]  # asyncpg: `$1`
PRODUCT_SQLITE = _compiled(ACTIVE_PRODUCT, _SQLITE, ("id",))  # one id
PRODUCTS_POSTGRESQL = _compiled(ACTIVE_PRODUCTS, _POSTGRESQL, ("ids",))  # a round's ids
KEYS_SQLITE = _compiled(ACTIVE_KEYS, _SQLITE, ())
KEYS_AFTER_POSTGRESQL = _compiled(ACTIVE_KEYS_AFTER, _POSTGRESQL, ("created_at", "id", "limit"))
CHANGES_SQLITE = _compiled(CHANGES, _SQLITE, ("seq", "id", "limit", "skip"))
CHANGES_POSTGRESQL = _compiled(CHANGES, _POSTGRESQL, ("seq", "id", "limit", "skip"))
TEXTS_SQLITE = _compiled(ACTIVE_TEXTS, _SQLITE, ())
TEXTS_AFTER_POSTGRESQL = _compiled(ACTIVE_TEXTS_AFTER, _POSTGRESQL, ("created_at", "id", "limit"))
COUNT_ACTIVE_SQLITE = _compiled(COUNT_ACTIVE, _SQLITE, ())
COUNT_ACTIVE_POSTGRESQL = _compiled(COUNT_ACTIVE, _POSTGRESQL, ())
ITEMS_SQLITE = _compiled(LIST_ITEMS_SQLITE, _SQLITE, ("ids",))
ITEMS_POSTGRESQL = _compiled(LIST_ITEMS_POSTGRESQL, _POSTGRESQL, ("ids",))
KEY_SQLITE = _compiled(KEY_BY_HASH, _SQLITE, ("key_hash",))
KEY_POSTGRESQL = _compiled(KEY_BY_HASH, _POSTGRESQL, ("key_hash",))
# sqlite3 returns timestamps as the text SQLite stores; the engine would convert these.
PRODUCT_TIMESTAMPS = tuple(
    column.name
    for column in ACTIVE_PRODUCT.selected_columns
    if isinstance(column.type, UTCDateTime)
)


class Prepared(NamedTuple):
    """A statement's SQL text for one driver, and its positional parameters' names in order."""

    sql: str
    parameters: tuple[str, ...]

    def arguments(self, values: dict[str, Any]) -> list[Any]:
        return [values[name] for name in self.parameters]


def _prepared(statement: Select[Any], dialect: Dialect) -> Prepared:
    compiled = statement.compile(dialect=dialect)
    return Prepared(compiled.string, tuple(compiled.positiontup or ()))


_DIALECTS = {"sqlite": _SQLITE, "postgresql": _POSTGRESQL}


@cache
def search_statements(dialect: str, sort: str, by_category: bool) -> tuple[Prepared, Prepared]:
    """A search's page and count (``catalog.search_repository.search_page``, ``search_count``) for
    ``dialect``'s driver, compiled once per sort and filter."""
    page = search_repository.search_page(dialect, sort, by_category)
    count = search_repository.search_count(dialect, by_category)
    return _prepared(page, _DIALECTS[dialect]), _prepared(count, _DIALECTS[dialect])


@cache
def search_ids_statement(dialect: str) -> Prepared:
    """``catalog.search_repository.search_ids`` for ``dialect``'s driver, compiled once."""
    return _prepared(search_repository.search_ids(dialect), _DIALECTS[dialect])


def search_values(
    dialect: str, words: list[str], category: str | None, limit: int, offset: int
) -> dict[str, Any]:
    match = search_repository.search_match(dialect, words)
    return {"match": match, "category": category, "limit": limit, "offset": offset}
