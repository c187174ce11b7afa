"""The contract's database URLs (``sqlite:///…``, ``postgresql://…``) and the drivers they map
to: SQLAlchemy's URL parsing only, so that every command may read one cheaply."""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url


class UnsupportedDatabaseURL(ValueError):
    pass


# A PostgreSQL URL's query option that says a connection pooler stands between the service and
# PostgreSQL: ``?pooler=pgbouncer`` (PgBouncer in transaction pooling; docs/deployment.md).
POOLER_OPTION = "pooler"
POOLERS = ("pgbouncer",)


def async_url(url: str) -> URL:
    """Map the contract's URLs (``sqlite:///…``, ``postgresql://…``) to our async drivers
    (without the ``pooler`` option: see :func:`pooler_of`)."""
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise UnsupportedDatabaseURL(f"not a database URL: {url!r}") from exc
    parsed = parsed.difference_update_query([POOLER_OPTION])
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise UnsupportedDatabaseURL("SQLite needs a file path, e.g. sqlite:///./commerce.db")
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend in {"postgresql", "postgres"}:
        return parsed.set(drivername="postgresql+asyncpg")
    raise UnsupportedDatabaseURL(
        f"unsupported database {backend!r}: use sqlite:///path or postgresql://user@host/db"
    )


def pooler_of(url: str) -> str | None:
    """The pooler a PostgreSQL URL names (``?pooler=pgbouncer``), or None (direct)."""
    try:
        value = make_url(url).query.get(POOLER_OPTION)
    except Exception:
        return None  # async_url says what is wrong with it
    if value is None:
        return None
    if not isinstance(value, str) or value not in POOLERS:
        raise UnsupportedDatabaseURL(f"unknown pooler {value!r}: the one supported is pgbouncer")
    return value


def asyncpg_dsn(url: URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)
