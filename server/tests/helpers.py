"""Small helpers for tests (fixtures live in conftest.py)."""

from __future__ import annotations


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
