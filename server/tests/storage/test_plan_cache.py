"""The service's PostgreSQL connections plan each execution with its parameters."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests import factories

pytestmark = pytest.mark.postgresql


async def test_statements_get_a_custom_plan_not_one_cached_while_a_table_was_small(
    postgresql_database_url: str,
) -> None:
    async with factories.opened(postgresql_database_url) as db, db.read() as conn:
        assert await conn.scalar(text("SHOW plan_cache_mode")) == "force_custom_plan"
