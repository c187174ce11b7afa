"""The audit tests' keys: an admin and a client key whose ids the rows name."""

from __future__ import annotations

import pytest

from commerce_api.accounts.service import CreatedKey
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests import factories


@pytest.fixture
async def admin(db: Database, settings: Settings) -> CreatedKey:
    return await factories.new_key(db, None, role="admin", environment=settings.environment)


@pytest.fixture
async def customer(db: Database, settings: Settings) -> CreatedKey:
    account_id = await factories.new_account(db)
    return await factories.new_key(db, account_id, environment=settings.environment)
