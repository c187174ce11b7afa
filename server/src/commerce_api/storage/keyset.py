"""Newest-first lists (orders, events) by keyset: their (created_at, id) order, their creation
range, and the cursor's condition — a range of the (…, created_at, id) indexes on both
backends, so a deep page costs what the first does."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Table, UnaryExpression, literal, tuple_

from commerce_api.core.pagination import NewestFirst


def newest_first(table: Table) -> tuple[UnaryExpression[object], UnaryExpression[object]]:
    return table.c.created_at.desc(), table.c.id.desc()


def window(table: Table, chosen: NewestFirst) -> list[ColumnElement[bool]]:
    """The conditions of ``chosen``: its creation range, and the items after its cursor."""
    conditions: list[ColumnElement[bool]] = []
    if chosen.created_gte is not None:
        conditions.append(table.c.created_at >= chosen.created_gte)
    if chosen.created_lt is not None:
        conditions.append(table.c.created_at < chosen.created_lt)
    if chosen.after is not None:
        created_at, id_ = table.c.created_at, table.c.id
        cursor = tuple_(
            literal(chosen.after.created_at, created_at.type), literal(chosen.after.id, id_.type)
        )
        # The plain bound first: it gives every planner the index range; the row comparison
        # then breaks the tie on id.
        conditions += [created_at <= chosen.after.created_at, tuple_(created_at, id_) < cursor]
    return conditions
