"""Database URLs of the contract map onto the async drivers."""

from __future__ import annotations

import pytest

from commerce_api.storage.urls import UnsupportedDatabaseURL, async_url


@pytest.mark.parametrize(
    ("url", "database"),
    [
        ("sqlite:///./commerce.db", "./commerce.db"),
        ("sqlite:///commerce.db", "commerce.db"),
        ("sqlite:////var/lib/commerce/commerce.db", "/var/lib/commerce/commerce.db"),
    ],
)
def test_sqlite_maps_to_aiosqlite(url: str, database: str) -> None:
    parsed = async_url(url)
    assert parsed.drivername == "sqlite+aiosqlite"
    assert parsed.database == database


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user:secret@db.example:6543/commerce",
        "postgres://user:secret@db.example:6543/commerce",
        "postgresql+psycopg2://user:secret@db.example:6543/commerce",
    ],
)
def test_postgresql_maps_to_asyncpg(url: str) -> None:
    parsed = async_url(url)
    assert parsed.drivername == "postgresql+asyncpg"
    assert parsed.username == "user"
    assert parsed.password == "secret"
    assert parsed.host == "db.example"
    assert parsed.port == 6543
    assert parsed.database == "commerce"


def test_postgresql_query_parameters_are_kept() -> None:
    parsed = async_url("postgresql://u@h/db?ssl=require")
    assert parsed.drivername == "postgresql+asyncpg"
    assert parsed.query == {"ssl": "require"}


@pytest.mark.parametrize(
    "url",
    [
        "mysql://user@host/db",
        "mssql+pyodbc://user@host/db",
        "oracle://user@host/db",
    ],
)
def test_other_databases_are_refused(url: str) -> None:
    with pytest.raises(UnsupportedDatabaseURL, match="unsupported database"):
        async_url(url)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite+aiosqlite://"])
def test_sqlite_in_memory_is_refused(url: str) -> None:
    with pytest.raises(UnsupportedDatabaseURL, match="file path"):
        async_url(url)


@pytest.mark.parametrize("url", ["", "not a url", "://nothing"])
def test_garbage_is_refused(url: str) -> None:
    with pytest.raises(UnsupportedDatabaseURL):
        async_url(url)


def test_unsupported_database_url_is_a_value_error() -> None:
    assert issubclass(UnsupportedDatabaseURL, ValueError)
