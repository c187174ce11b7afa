"""The catalogue's search statements on each backend's full-text index (migrations 0009,
0012): a search's words, its page and count, and the ids it matches. The read path answers
searches from memory once its index is built (``readpath/search_index.py``); these serve the
time before, and the database side of the tests that compare the two."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    FromClause,
    Integer,
    Select,
    String,
    bindparam,
    column,
    func,
    select,
    table,
    text,
)

from commerce_api.catalog.repository import LIST_COLUMNS, active_conditions, list_order
from commerce_api.catalog.schemas import ProductSort
from commerce_api.storage.tables import products

# A search's words: runs of letters and digits, as both indexes split the text (migration 0009).
_WORD = re.compile(r"[^\W_]+")

# SQLite: FTS5's ``product_search`` (its rowid numbered by ``product_search_rows``, migration
# 0009), joined to the products: SQLite reads the index first, then each match by key (with
# ``id IN (…)`` instead it took several times longer).
_search_rows = table("product_search_rows", column("id", Integer), column("product_id", String))
_search = table("product_search", column("rowid", Integer))
_SQLITE_SEARCHED = products.join(_search_rows, _search_rows.c.product_id == products.c.id).join(
    _search, _search.c.rowid == _search_rows.c.id
)
_SQLITE_MATCHES = text("product_search MATCH :match")
# PostgreSQL: each product's words in ``product_search_words`` and its GIN index (migration
# 0012), joined to the products.
_words = table("product_search_words", column("product_id", String))
_POSTGRESQL_SEARCHED = products.join(_words, _words.c.product_id == products.c.id)
_POSTGRESQL_MATCHES = text("product_search_words.words @@ to_tsquery('simple', :match)")


def search_words(q: str) -> list[str]:
    """The words of a search, lower-cased."""
    return _WORD.findall(q.lower())


def search_match(dialect: str, words: list[str]) -> str:
    """The ``match`` parameter of the search statements: each word (letters and digits only,
    so never an operator) as a prefix, all of them needed."""
    if dialect == "sqlite":
        return " ".join(f'"{word}"*' for word in words)
    return " & ".join(f"'{word}':*" for word in words)


def _searched(dialect: str, by_category: bool) -> tuple[FromClause, list[ColumnElement[bool]]]:
    """Where to read, and the conditions: active products (of ``:category``) holding the
    words of ``:match``."""
    conditions = active_conditions(bindparam("category") if by_category else None)
    if dialect == "sqlite":
        conditions.append(_SQLITE_MATCHES)  # type: ignore[arg-type]
        return _SQLITE_SEARCHED, conditions
    conditions.append(_POSTGRESQL_MATCHES)  # type: ignore[arg-type]
    return _POSTGRESQL_SEARCHED, conditions


@cache
def search_page(dialect: str, sort: ProductSort, by_category: bool) -> Select[Any]:
    """A page of a search (``:match``, ``:category`` if ``by_category``, ``:limit``,
    ``:offset``): the list fields in ``sort`` order. (Not with ``count(*) OVER ()``: on SQLite
    that window costs several times the page and a count together.)"""
    source, conditions = _searched(dialect, by_category)
    return (
        select(*LIST_COLUMNS)
        .select_from(source)
        .where(*conditions)
        .order_by(*list_order(dialect, sort))
        .limit(bindparam("limit", type_=BigInteger))
        .offset(bindparam("offset", type_=BigInteger))  # up to 2**53 - 1
    )


@cache
def search_count(dialect: str, by_category: bool) -> Select[Any]:
    """The number of a search's matches (``:match``, ``:category`` if ``by_category``)."""
    source, conditions = _searched(dialect, by_category)
    return select(func.count()).select_from(source).where(*conditions)


@cache
def search_ids(dialect: str) -> Select[Any]:
    """The ids of the products holding the words of ``:match``, in no order, archived ones
    too (the read path orders and pages them from its snapshot of the catalogue, which has the
    active products only): read from the full-text index alone, never from the products —
    there, a planner that misjudged how many products are active would scan them all."""
    if dialect == "sqlite":
        return (
            select(_search_rows.c.product_id)
            .select_from(_search.join(_search_rows, _search_rows.c.id == _search.c.rowid))
            .where(_SQLITE_MATCHES)
        )
    return select(_words.c.product_id).where(_POSTGRESQL_MATCHES)
