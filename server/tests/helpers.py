"""Small helpers for tests (fixtures live in conftest.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

from alembic.script import ScriptDirectory
from starlette.types import Scope

from commerce_api.core.timestamps import utcnow
from commerce_api.storage.migrations import alembic_config


class Clock:
    """A clock a test moves by hand, to stand in for ``utcnow`` where code waits on time:
    call it for the time (UTC), :meth:`advance` it instead of sleeping."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def head_revision() -> str:
    """The newest migration's revision id."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def order_scope(client_key: str, length: int, idempotency_key: str | None = None) -> Scope:
    """The ASGI scope of a ``POST /v1/orders`` announcing a ``length``-byte JSON body, for tests
    that drive the app's receive channel themselves (bodies in pieces, a client hanging up)."""
    headers = [
        (b"host", b"testserver"),
        (b"authorization", f"Bearer {client_key}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(length).encode()),
    ]
    if idempotency_key is not None:
        headers.append((b"idempotency-key", idempotency_key.encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/orders",
        "raw_path": b"/v1/orders",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
