"""Small helpers for tests (fixtures live in conftest.py)."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from commerce_api.migrations import alembic_config


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def head_revision() -> str:
    """The newest migration's revision id."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head
