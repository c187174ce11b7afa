"""What PgBouncer costs: reads and orders through it, beside the same service direct.

One PostgreSQL database of the bench's own (1,000 products), two ``serve`` processes on it (one
worker each, no dispatcher, the rate limiter off): one direct, one through a PgBouncer of its
own in transaction pooling (the tests' configuration, ``server/tests/pgbouncer_process.py``;
``?pooler=pgbouncer``, its listener direct through ``COMMERCE_DATABASE_LISTEN_URL``). Each row
loads the two in turn (``run.measure_side_by_side``), so a drifting machine moves both alike.
Writes ``bench/results/<output>.md``.

Run from the repository root: ``.venv/bin/python bench/pgbouncer.py`` (needs wrk, pgbouncer
and the PostgreSQL of ``COMMERCE_BENCH_POSTGRES_URL``; as root, PgBouncer runs as postgres).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

from run import (
    BIN,
    HOT,
    RESULTS,
    ROOT,
    SPREAD,
    Scenario,
    Target,
    bench_database,
    flash_sale_products,
    free_port,
    measure_side_by_side,
    order_script,
    prepare,
    process,
)

sys.path.insert(0, str(ROOT / "server"))
from tests.pgbouncer_process import running_pgbouncer

READ = "product by id"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--output", default="pgbouncer", help="bench/results/<output>.md")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("needs wrk: `sudo apt-get install wrk` (Debian/Ubuntu).")
    work = Path(tempfile.mkdtemp(prefix="commerce-bench-pgbouncer-"))
    pairs: list[tuple[Scenario, Scenario]] = []
    try:
        with bench_database("postgresql", work / "unused.db") as database_url:
            key, hot = asyncio.run(prepare(database_url, 1000))
            spread, _ = asyncio.run(flash_sale_products(database_url))
            asyncio.run(settings_on_the_database(database_url))
            with running_pgbouncer(database_url) as bouncer:
                env = {
                    **{k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")},
                    "COMMERCE_RATE_LIMIT_ENABLED": "false",
                }
                direct_env = {**env, "COMMERCE_DATABASE_URL": database_url}
                pooled_env = {
                    **env,
                    "COMMERCE_DATABASE_URL": bouncer.url_for(database_url),
                    "COMMERCE_DATABASE_LISTEN_URL": database_url,
                }
                direct_port, pooled_port = free_port(), free_port()
                serve = [str(BIN / "commerce-api"), "serve", "--no-dispatcher", "--port"]
                with (
                    process([*serve, str(direct_port)], direct_env, direct_port) as direct_pid,
                    process([*serve, str(pooled_port)], pooled_env, pooled_port) as pooled_pid,
                ):
                    headers = {"Authorization": f"Bearer {key}"}
                    rows = [
                        (READ, f"/v1/products/{hot}", ""),
                        (HOT, "/v1/orders", order_script(work / "hot.lua", [hot], "cus_pgb")),
                        (SPREAD, "/v1/orders", order_script(work / "sp.lua", spread, "cus_pgb")),
                    ]
                    for name, path, lua in rows:
                        name = name.replace(" (2 processes)", "")
                        direct = Scenario("postgresql", 1000, name, path)
                        pooled = Scenario("postgresql via pgbouncer", 1000, name, path)
                        print(f"== {name}", flush=True)
                        measure_side_by_side(
                            [
                                Target(
                                    direct,
                                    f"http://127.0.0.1:{direct_port}{path}",
                                    headers,
                                    direct_pid,
                                    lua,
                                ),
                                Target(
                                    pooled,
                                    f"http://127.0.0.1:{pooled_port}{path}",
                                    headers,
                                    pooled_pid,
                                    lua,
                                ),
                            ],
                            args,
                            threads=1,
                            cpu=None,
                        )
                        pairs.append((direct, pooled))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(pairs, args)


async def settings_on_the_database(database_url: str) -> None:
    """The server settings a direct connection sends at connect, on the bench's database for
    every connection (docs/deployment.md: through PgBouncer they go on the role or database)."""
    import asyncpg
    from sqlalchemy.engine import make_url

    from commerce_api.storage.connecting import SERVER_SETTINGS

    url = make_url(database_url)
    conn = await asyncpg.connect(url.set(drivername="postgresql").render_as_string(False))
    try:
        for name, value in SERVER_SETTINGS.items():
            await conn.execute(f"ALTER DATABASE \"{url.database}\" SET {name} = '{value}'")
    finally:
        await conn.close()


def report(pairs: list[tuple[Scenario, Scenario]], args: argparse.Namespace) -> None:
    lines = [
        "# PgBouncer's cost: the same service direct and through PgBouncer (transaction pooling)",
        "",
        f"PostgreSQL, 1,000 products, one `serve` worker each, {args.rounds} rounds of "
        f"{args.duration} s, {args.connections} connections; medians (min–max of the ratio).",
        "",
        "| scenario | direct req/s | via PgBouncer req/s | ratio | p99 direct | p99 via"
        " | non-2xx |",
        "|---|---|---|---|---|---|---|",
    ]
    for direct, pooled in pairs:
        ratios = [
            p.requests_per_second / d.requests_per_second
            for d, p in zip(direct.runs, pooled.runs, strict=True)
        ]
        rate_d, rate_p = direct.median("requests_per_second"), pooled.median("requests_per_second")
        errors = sum(run.non_2xx for run in (*direct.runs, *pooled.runs))
        lines.append(
            f"| {direct.name} | {rate_d:,.0f} | {rate_p:,.0f} | {rate_p / rate_d:.2f}"
            f" ({min(ratios):.2f}–{max(ratios):.2f}) | {direct.median('p99_ms'):.1f} ms"
            f" | {pooled.median('p99_ms'):.1f} ms | {errors} |"
        )
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.output}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
