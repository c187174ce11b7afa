"""Shared fixtures: a clean database on each backend, an app, an HTTP client, keys.

Backends: SQLite (a file per test, copied from a migrated template) and PostgreSQL (one
database with a random name per session, emptied before each test, dropped at the end).

PostgreSQL comes from ``COMMERCE_TEST_POSTGRES_URL`` (default: the local server as user
``postgres``). Where it is unreachable the PostgreSQL tests skip, saying why, unless
``COMMERCE_TEST_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), which makes that a failure.

A third backend, ``pgbouncer``: the same PostgreSQL database through PgBouncer in transaction
pooling (``tests.pgbouncer_process``), for the tests marked ``pgbouncer`` only (the order and
read tests): their ``database_url`` cases run a third time through it. Where PgBouncer is not
installed these skip, saying why, unless ``COMMERCE_TEST_REQUIRE_PGBOUNCER=1`` (``.ci/run``).

In parallel (``make test``: pytest-xdist's ``-n``), each worker is a session of its own, so
every fixture here is per worker without more: its own PostgreSQL database (named after the
worker), its own temporary directory (the SQLite files), and, in the tests that need them,
Redis key prefixes of the test's own and servers on free ports. A new test that uses these
fixtures is safe in parallel as it is. Tests share a worker only where they share something
that must exist once: ``pytestmark = pytest.mark.xdist_group("name")`` keeps a module's tests
on one worker (``--dist loadgroup``), so a module-scoped server starts once, or a build in the
work tree runs once at a time.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.engine import make_url

from commerce_api.accounts import service as accounts
from commerce_api.app.factory import create_app
from commerce_api.app.services import Services
from commerce_api.settings import Settings, Tier
from commerce_api.storage.db import Database
from commerce_api.storage.tables import metadata
from tests import factories, pgbouncer_process
from tests.pgbouncer_process import RunningPgBouncer

POSTGRES_ADMIN_URL = os.environ.get(
    "COMMERCE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REQUIRE_POSTGRES = os.environ.get("COMMERCE_TEST_REQUIRE_POSTGRES") == "1"
REQUIRE_PGBOUNCER = os.environ.get("COMMERCE_TEST_REQUIRE_PGBOUNCER") == "1"
BACKENDS = ["sqlite", "postgresql"]
POOLED = "pgbouncer"  # the third backend, for tests marked so
# The pytest-xdist worker this session is (``gw0``, ``gw1``, …), ``main`` when not in parallel.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
# Each PgBouncer URL handed out, with the direct URL behind it (``make_settings`` listens there).
DIRECT_URLS: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    """The processes the tests start (``serve``, the CLI, workers, pytest-xdist's own) read and
    write their bytecode in one cache outside the tree, kept between runs: without it each of
    them compiles every module it imports (where ``PYTHONDONTWRITEBYTECODE`` is set, as here), a
    second or more of start-up each. Python writes a cache file atomically and checks it against
    its source, so the workers and several checkouts share the cache safely."""
    if "PYTHONPYCACHEPREFIX" not in os.environ:
        cache = Path(tempfile.gettempdir()) / f"commerce-tests-pycache-{os.getuid()}"
        cache.mkdir(mode=0o700, exist_ok=True)
        os.environ["PYTHONPYCACHEPREFIX"] = str(cache)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture(scope="session")
def pycache() -> Path:
    """The bytecode cache of the processes the tests start (``pytest_configure``)."""
    return Path(os.environ["PYTHONPYCACHEPREFIX"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``pgbouncer`` cases only for the tests marked ``pgbouncer``."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        pooled = callspec is not None and callspec.params.get("database_url") == POOLED
        unmarked = item.get_closest_marker("pgbouncer") is None
        (dropped if pooled and unmarked else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
async def postgres_url() -> AsyncIterator[str]:
    """A migrated PostgreSQL database, created for this session and dropped after it."""
    try:
        admin = await asyncpg.connect(_asyncpg_dsn(POSTGRES_ADMIN_URL), timeout=5)
    except Exception as exc:
        message = f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL}: {exc}"
        if REQUIRE_POSTGRES:
            pytest.fail(message)
        pytest.skip(message + " (set COMMERCE_TEST_POSTGRES_URL)")
    name = f"commerce_test_{WORKER}_{secrets.token_hex(6)}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        db = Database(url)
        await db.migrate()
        await db.dispose()
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="session")
async def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file that each test copies (faster than migrating every time)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    db = Database(f"sqlite:///{path}")
    await db.migrate()
    async with db.write() as conn:  # fold the WAL into the main file before copying it
        await conn.execute(text("SELECT 1"))
    async with db.engine.connect() as conn:
        await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    await db.dispose()
    return path


async def empty_postgres(url: str) -> None:
    """Every row gone, children first (``product_search_words`` goes with ``products``: ON
    DELETE CASCADE). DELETE, not TRUNCATE: a test leaves a few rows, and TRUNCATE makes each
    table's files anew before every test, far slower than these DELETEs."""
    db = Database(url)
    try:
        async with db.write() as conn:
            for table in reversed(metadata.sorted_tables):
                await conn.execute(table.delete())
    finally:
        await db.dispose()


@pytest.fixture(params=[*BACKENDS, POOLED])
def database_url(request: pytest.FixtureRequest) -> str:
    """The URL of a clean, migrated database, once per backend (and through PgBouncer for the
    tests marked ``pgbouncer``)."""
    url: str = request.getfixturevalue(f"{request.param}_database_url")
    return url


@pytest.fixture(scope="session")
def pgbouncer(postgres_url: str) -> Iterator[RunningPgBouncer]:
    """PgBouncer in transaction pooling in front of the session's PostgreSQL database."""
    if pgbouncer_process.executable() is None:
        message = "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
        if REQUIRE_PGBOUNCER:
            pytest.fail(message)
        pytest.skip(message)
    with pgbouncer_process.running_pgbouncer(postgres_url) as running:
        yield running


@pytest.fixture
async def pgbouncer_database_url(postgresql_database_url: str, pgbouncer: RunningPgBouncer) -> str:
    """The clean PostgreSQL database through PgBouncer (``?pooler=pgbouncer``)."""
    url = pgbouncer.url_for(postgresql_database_url)
    DIRECT_URLS[url] = postgresql_database_url
    return url


@pytest.fixture
def sqlite_database_url(tmp_path: Path, sqlite_template: Path) -> str:
    path = tmp_path / "commerce.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
async def postgresql_database_url(postgres_url: str) -> str:
    await empty_postgres(postgres_url)
    return postgres_url


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``sqlite:///…`` of a file that does not exist yet, or the session PostgreSQL URL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
async def empty_database_url(empty_backend: str) -> AsyncIterator[str]:
    """An empty (never migrated) database on each backend."""
    if empty_backend.startswith("sqlite"):
        yield empty_backend
        return
    dsn = make_url(empty_backend).set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"commerce_fresh_{WORKER}_{secrets.token_hex(6)}"
    admin = await asyncpg.connect(dsn, timeout=5)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield make_url(empty_backend).set(database=name).render_as_string(hide_password=False)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture
def backend(database_url: str) -> str:
    return "sqlite" if database_url.startswith("sqlite") else "postgresql"


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    async with factories.opened(database_url) as database:
        yield database


def make_settings(database_url: str, **overrides: object) -> Settings:
    """Settings for a test app. The webhook dispatcher is off unless a test turns it on."""
    values: dict[str, object] = {
        # Through PgBouncer: the change notifications are listened for on the direct URL.
        "database_listen_url": DIRECT_URLS.get(database_url),
        "run_dispatcher": False,
        # The tests' receivers listen on 127.0.0.1; a test of the URL policy turns this off.
        "webhook_allow_private_urls": True,
        "secret_key": "test-secret-key-0123456789abcdef-0123456789",
        **overrides,
    }
    return Settings(_env_file=None, database_url=database_url, **values)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
def services(app: FastAPI) -> Services:
    """The running app's services (its database, read path, order desk, …)."""
    found: Services = app.state.services
    return found


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield http


KeyFactory = Callable[..., Awaitable[str]]


@pytest.fixture
def make_key(db: Database, settings: Settings) -> KeyFactory:
    """``await make_key()`` → a client key for a new account; ``role="admin"`` for an admin key,
    ``role="publishable"`` for a new account's publishable key."""

    async def make(role: accounts.Role = "client", tier: Tier = "development") -> str:
        account_id = await factories.new_account(db, tier=tier) if role != "admin" else None
        key = await factories.new_key(db, account_id, role=role, environment=settings.environment)
        return key.secret

    return make


@pytest.fixture
async def client_key(make_key: KeyFactory) -> str:
    return await make_key()


@pytest.fixture
async def admin_key(make_key: KeyFactory) -> str:
    return await make_key("admin")


@pytest.fixture
async def publishable_key(make_key: KeyFactory) -> str:
    return await make_key("publishable")


@pytest.fixture
async def product_in_stock(client: httpx.AsyncClient, admin_key: str) -> str:
    """The id of a product made over HTTP by an admin: 10 in stock at 12.50."""
    product_id: str = (await factories.create_product(client, admin_key))["id"]
    return product_id
