"""Small helpers for tests (fixtures live in conftest.py)."""

from __future__ import annotations

import asyncio
import ipaddress
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic.script import ScriptDirectory
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope

from commerce_api.app.factory import create_app
from commerce_api.core.timestamps import utcnow
from commerce_api.orders import batch_repository, placement_repository
from commerce_api.settings import Settings
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


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app built from ``settings``, started (its lifespan run), with an HTTP client on it."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield application, http


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of an app of its own, built from ``settings`` and started."""
    async with running_app(settings) as (_, http):
        yield http


PAGINATION_FIELDS = {"total", "limit", "offset", "has_more"}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")  # as the API writes them


async def list_page(
    client: httpx.AsyncClient, path: str, key: str, **params: str | int
) -> dict[str, Any]:
    """A page of a list endpoint (which must answer 200 in the list shape)."""
    response = await client.get(path, params=params, headers=bearer(key))
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    assert set(page) == {"data", "pagination"}
    assert set(page["pagination"]) == PAGINATION_FIELDS
    return page


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


def self_signed_certificate(directory: Path, host: str) -> tuple[Path, Path]:
    """A certificate for ``host`` and 127.0.0.1, valid for a day either side of now, that signs
    itself (it is its own CA), with its key: ``(cert.pem, key.pem)`` in ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def crash_after_writing_orders(
    monkeypatch: pytest.MonkeyPatch, message: str, *, times: int | None = None
) -> None:
    """Make the order desk raise ``RuntimeError(message)`` just after it wrote a batch's orders
    (SQLite: their rows, before the events and the stock; PostgreSQL: the orders, lines, events
    and deliveries, one statement — with the keys and the stock, for the usual batch), before
    the transaction commits; the first ``times`` batches only, if given."""
    crashes = 0

    def written_then_crash(write: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def crash(*args: object, **kwargs: object) -> Any:
            nonlocal crashes
            written = await write(*args, **kwargs)
            if times is None or crashes < times:
                crashes += 1
                raise RuntimeError(message)
            return written

        return crash

    for module, name in (
        (placement_repository, "insert_orders"),
        (batch_repository, "write_placed"),
        (batch_repository, "place_and_finish"),  # the usual batch: orders and stock at once
    ):
        monkeypatch.setattr(module, name, written_then_crash(getattr(module, name)))


# --- an ASGI layer called in process (the server guard's tests) -----------------------------


def guard_scope(method: str = "GET", headers: list[tuple[bytes, bytes]] | None = None) -> Scope:
    """An HTTP request's scope for ``/v1/orders`` from one client address."""
    return {
        "type": "http",
        "method": method,
        "path": "/v1/orders",
        "raw_path": b"/v1/orders",
        "query_string": b"",
        "headers": headers or [(b"host", b"x")],
        "client": ("192.0.2.1", 5000),
    }


async def sent_by(app: ASGIApp, scope: Scope, receive: Receive) -> list[Message]:
    """The messages ``app`` sends for one request."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def never_receive(*_: Any) -> Message:
    """A ``receive`` whose body never comes."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")
