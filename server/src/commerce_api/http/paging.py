"""The query parameters every list endpoint pages with (``core.pagination`` holds the rules)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from commerce_api.core.pagination import MAX_ID_LENGTH, MAX_OFFSET
from commerce_api.core.timestamps import Timestamp

Limit = Annotated[int, Query(ge=1, description="Page size; values above 100 are clamped to 100.")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Number of items to skip.")]
StartingAfter = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="A cursor: the items after the one with this id, in the list's order "
        "(pass the last id of a page to get the next). Items created meanwhile never shift "
        "it; an `offset` counts from it. An id you cannot see is a 404.",
    ),
]
CreatedGte = Annotated[
    Timestamp | None,
    Query(description="Only items created at or after this time (RFC 3339, with its zone)."),
]
CreatedLt = Annotated[
    Timestamp | None,
    Query(description="Only items created before this time (RFC 3339, with its zone)."),
]
