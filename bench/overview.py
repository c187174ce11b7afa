"""``make bench-overview``: the console overview of a shop with 1,000,000 orders, on SQLite and
(with ``--postgres-url``) on PostgreSQL; the target is 200 ms (issue 29).

For each backend it makes a fresh database at the newest migration and bulk-loads, in SQL (a
recursive CTE on SQLite, ``generate_series`` on PostgreSQL): one account, ``--orders`` orders
spread evenly over the last ``--days`` days (1,000,000 over 60: ~16,700 a day, so the overview's
30 days hold ~500,000; one in ten canceled, the last day's half pending, the rest fulfilled),
10,000 products (one in a hundred at or under the low-stock threshold), 16 webhook endpoints (3
failing) and 10,000 pending deliveries. Then (after ``ANALYZE``, and on PostgreSQL ``VACUUM``, as
autovacuum would have done) it times, ``--runs`` times each, the overview's database reads
(``console.pages.overview.overview_figures``: every query of the page) and the whole page
(``GET /dashboard`` through the ASGI app, signed in with an admin key: the queries, the
``/metrics`` counters and the rendering), and prints the median with min-max.

    .venv/bin/python bench/overview.py [--postgres-url postgresql://postgres@127.0.0.1/postgres]

PostgreSQL: the run creates the database ``commerce_bench_overview`` beside the URL's and
drops it at the end; it never touches the URL's own database.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from commerce_api.accounts import service as accounts
from commerce_api.app.factory import create_app
from commerce_api.console.figures import DAYS, overview_figures
from commerce_api.core.timestamps import utcnow
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database
from commerce_api.storage.urls import async_url

BENCH_DATABASE = "commerce_bench_overview"
TARGET_MS = 200.0
PRODUCTS = 10_000
ENDPOINTS = 16
FAILING = 3
DELIVERIES = 10_000

# One order every (days * 86,400 / count) seconds, the last one now; ids in time order.
ORDERS_SQLITE = """
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :count - 1)
INSERT INTO orders (id, account_id, status, customer_id, shipping_address, total_minor,
                    currency, created_at, updated_at, version)
SELECT printf('ord_bench%012d', i), :account,
       CASE WHEN i % 10 = 0 THEN 'canceled'
            WHEN i >= :count - :per_day AND i % 2 = 1 THEN 'pending'
            ELSE 'fulfilled' END,
       'cus_' || (i % 1000), '{"street": "1 Main St", "city": "Springfield"}',
       1000 + (i * 7919) % 50000, 'USD', at, at, 1
FROM (SELECT i, strftime('%Y-%m-%d %H:%M:%S', :first + i * :step, 'unixepoch') || '.000000' AS at
      FROM n)
"""
ORDERS_POSTGRESQL = """
INSERT INTO orders (id, account_id, status, customer_id, shipping_address, total_minor,
                    currency, created_at, updated_at, version)
SELECT 'ord_bench' || lpad(i::text, 12, '0'), :account,
       CASE WHEN i % 10 = 0 THEN 'canceled'
            WHEN i >= :count - :per_day AND i % 2 = 1 THEN 'pending'
            ELSE 'fulfilled' END,
       'cus_' || (i % 1000), '{"street": "1 Main St", "city": "Springfield"}'::json,
       1000 + (i::bigint * 7919) % 50000, 'USD', at, at, 1
FROM (SELECT i, to_timestamp(CAST(:first AS float8) + i * CAST(:step AS float8)) AS at
      FROM generate_series(0, :count - 1) AS i) AS n
"""
PRODUCTS_SQL = """
INSERT INTO products (id, name, description, price_minor, category, inventory_count,
                      created_at, updated_at)
SELECT {id}, 'Product ' || i, '', 1000 + i, 'bench', CASE WHEN i % 100 = 0 THEN i % 6 ELSE 50 END,
       {now}, {now}
FROM {series}
"""
ENDPOINTS_SQL = """
INSERT INTO webhook_endpoints (id, account_id, url, event_types, enabled, disabled_reason,
                               failing_since, secret_encrypted, created_at, updated_at)
SELECT {id}, :account, 'https://example.com/hook/' || i, '[]'{json}, {enabled}, NULL,
       CASE WHEN i > 1 AND i <= :failing THEN {now} END, :secret, {now}, {now}
FROM {series}
"""
DELIVERIES_SQL = """
INSERT INTO events (id, account_id, type, created_at, data, order_id)
SELECT {event_id}, :account, 'order.created', {now}, '{{}}'{json}, NULL FROM {series};
INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, next_attempt_at,
                                created_at, updated_at)
SELECT {event_id}, {endpoint}, 'pending', 0, {now}, {now}, {now} FROM {series}
"""


def _dialect(sqlite: bool) -> dict[str, str]:
    """The SQL spellings of the two backends for the templates above."""
    if sqlite:
        return {
            "series": "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < :rows) SELECT i FROM n)",
            "now": "strftime('%Y-%m-%d %H:%M:%S', 'now') || '.000000'",
            "id": "printf('prod_bench%08d', i)",
            "event_id": "printf('evt_bench%08d', i)",
            "endpoint": "'we_bench00000001'",
            "enabled": "i <> 1",
            "json": "",
        }
    return {
        "series": "generate_series(1, :rows) AS i",
        "now": "now()",
        "id": "'prod_bench' || lpad(i::text, 8, '0')",
        "event_id": "'evt_bench' || lpad(i::text, 8, '0')",
        "endpoint": "'we_bench00000001'",
        "enabled": "i <> 1",
        "json": "::json",
    }


async def load(db: Database, settings: Settings, orders: int, days: int) -> str:
    """The shop of the module docstring; the account's id."""
    sqlite = db.is_sqlite
    spelled = _dialect(sqlite)
    assert settings.secret_key is not None
    secret = SecretBox(settings.secret_key).encrypt("whsec_" + "0" * 32)
    async with db.write() as conn:
        account = await accounts.create_account(conn, "Bench shop", "production")
    now = utcnow().timestamp()
    step = days * 86_400 / orders
    began = time.perf_counter()
    async with db.write() as conn:
        await conn.execute(
            text(ORDERS_SQLITE if sqlite else ORDERS_POSTGRESQL),
            {
                "count": orders,
                "account": account,
                "per_day": int(86_400 / step),
                "first": now - (orders - 1) * step,
                "step": step,
            },
        )
        await conn.execute(text(PRODUCTS_SQL.format(**spelled)), {"rows": PRODUCTS})
        endpoints = ENDPOINTS_SQL.format(**{**spelled, "id": spelled["id"].replace("prod", "we")})
        await conn.execute(
            text(endpoints),
            {"rows": ENDPOINTS, "account": account, "failing": FAILING, "secret": secret},
        )
        for statement in DELIVERIES_SQL.format(**spelled).split(";"):
            await conn.execute(text(statement), {"rows": DELIVERIES, "account": account})
    print(f"  loaded {orders:,} orders over {days} days in {time.perf_counter() - began:.0f} s")
    began = time.perf_counter()
    if sqlite:
        async with db.write() as conn:
            await conn.execute(text("ANALYZE"))
    else:
        engine = create_async_engine(db.url, isolation_level="AUTOCOMMIT")
        async with engine.connect() as conn:
            await conn.execute(text("VACUUM ANALYZE"))
        await engine.dispose()
    print(f"  ANALYZE{'' if sqlite else ' and VACUUM'} in {time.perf_counter() - began:.0f} s")
    return account


async def timed(
    runs: int, work: Callable[[], Awaitable[object]]
) -> tuple[list[float], list[float]]:
    """Milliseconds of each of ``runs`` runs of ``work`` (after one unmeasured run): wall
    clock, and this process's CPU (all its threads: SQLite's work, not PostgreSQL's)."""
    await work()
    walls, cpus = [], []
    for _ in range(runs):
        began, cpu = time.perf_counter(), time.process_time()
        await work()
        walls.append((time.perf_counter() - began) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return walls, cpus


def report(what: str, times: tuple[list[float], list[float]]) -> str:
    walls, cpus = times
    median = statistics.median(walls)
    verdict = "ok" if median <= TARGET_MS else f"OVER {TARGET_MS:.0f} ms"
    return (
        f"  {what}: median {median:.1f} ms (min {min(walls):.1f}, max {max(walls):.1f}) "
        f"{verdict}; this process's CPU: median {statistics.median(cpus):.1f} ms"
    )


async def measure(url: str, args: argparse.Namespace) -> list[str]:
    settings = Settings(
        _env_file=None,
        database_url=url,
        run_dispatcher=False,
        secret_key="bench-secret-key-0123456789abcdef-0123456789",  # noqa: S106 - a bench
        rate_limit_enabled=False,
    )
    db = Database(url)
    try:
        await db.migrate()
        await load(db, settings, args.orders, args.days)
        async with db.write() as conn:
            admin = await accounts.create_key(conn, "sandbox", account_id=None, role="admin")
        began = time.perf_counter()
        figures = await overview_figures(db, settings, utcnow())
        first = (time.perf_counter() - began) * 1000
        print(f"  first overview (keeps the closed hours in the rollup): {first:.0f} ms")
        print(
            f"  30 days: {sum(day.orders for day in figures.days):,} orders; "
            f"24 hours: {sum(hour.orders for hour in figures.hours):,}; "
            f"pending {figures.pending_orders:,}, low stock {figures.low_stock_total}, "
            f"failing endpoints {figures.failing_total}, outbox {figures.outbox_pending:,}"
        )
        queries = await timed(args.runs, lambda: overview_figures(db, settings, utcnow()))
    finally:
        await db.dispose()
    app = create_app(settings)
    async with app.router.lifespan_context(app), _signed_in(app, admin.secret) as client:

        async def page() -> None:
            response = await client.get("/dashboard")
            assert response.status_code == 200, response.text[:500]

        pages = await timed(args.runs, page)
    return [
        f"  first overview after the load (closes {DAYS - 1}+ days of hours): {first:.0f} ms",
        report("overview queries", queries),
        report("GET /dashboard", pages),
    ]


@asynccontextmanager
async def _signed_in(app: object, key: str) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        form = await client.get("/dashboard/sign-in")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token is not None
        signed = await client.post(
            "/dashboard/sign-in", data={"key": key, "csrf_token": token.group(1)}
        )
        assert signed.status_code == 303, signed.text[:500]
        yield client


@asynccontextmanager
async def postgres_database(admin_url: str) -> AsyncIterator[str]:
    """A fresh database beside ``admin_url``'s, dropped afterwards; its URL."""
    engine = create_async_engine(async_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(f"DROP DATABASE IF EXISTS {BENCH_DATABASE} WITH (FORCE)"))
            await conn.execute(text(f"CREATE DATABASE {BENCH_DATABASE}"))
        url = make_url(admin_url).set(database=BENCH_DATABASE)
        yield url.render_as_string(hide_password=False)
    finally:
        async with engine.connect() as conn:
            await conn.execute(text(f"DROP DATABASE IF EXISTS {BENCH_DATABASE} WITH (FORCE)"))
        await engine.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description="The console overview of 1,000,000 orders.")
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--postgres-url", help="also measure PostgreSQL (a server to use)")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    args = parser.parse_args()
    lines = []
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as directory:
            print("SQLite:")
            url = f"sqlite:///{Path(directory) / 'overview.db'}"
            lines += ["SQLite:", *await measure(url, args)]
    if args.postgres_url:
        print("PostgreSQL:")
        async with postgres_database(args.postgres_url) as url:
            lines += ["PostgreSQL:", *await measure(url, args)]
    print(f"\nThe overview of {args.orders:,} orders over {args.days} days ({args.runs} runs):")
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
