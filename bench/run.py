"""``make bench``: load-test the real service against a ceiling app, figures as ratios.

Starts ``commerce-api serve`` (one worker, pinned to CPU 0 when taskset exists) on a generated
catalogue, drives it with wrk from a separate process (pinned to CPU 1), and does the same for
the ceiling app (``bench/ceiling.py``) serving the same bytes. Every scenario runs ``--rounds``
times; the report gives the median with min-max and the ratio of medians to the ceiling.

Scenarios: GET /v1/products?limit=20 with the rate limiter on and off (the limiter's cost).

Results: bench/results/latest.json and bench/results/latest.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
RESULTS = ROOT / "bench" / "results"


@dataclass
class Run:
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    errors: int


@dataclass
class Scenario:
    name: str
    runs: list[Run]

    def median(self, field: str) -> float:
        return float(statistics.median(getattr(run, field) for run in self.runs))

    def spread(self, field: str) -> tuple[float, float]:
        values = [getattr(run, field) for run in self.runs]
        return min(values), max(values)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(cpu: int, command: list[str]) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(cpu), *command]
    return command


@contextmanager
def process(command: list[str], env: dict[str, str], port: int) -> Iterator[None]:
    proc = subprocess.Popen(  # noqa: S603
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{command[0]} exited: {proc.stderr.read() if proc.stderr else ''}"
                )
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("server did not start within 30 s") from None
                time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


_LATENCY = re.compile(r"^\s+(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_RATE = re.compile(r"^Requests/sec:\s+([\d.]+)", re.MULTILINE)
_ERRORS = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)|Socket errors:.*?(\d+)")


def wrk(url: str, headers: dict[str, str], duration: int, connections: int) -> Run:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency"]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    out = subprocess.run(  # noqa: S603
        pinned(1, [*command, url]), capture_output=True, text=True, check=True
    ).stdout
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    latencies = {p: float(v) * scale[u] for p, v, u in _LATENCY.findall(out)}
    rate = _RATE.search(out)
    errors = sum(int(a or b or 0) for a, b in _ERRORS.findall(out))
    if rate is None or "50" not in latencies or "99" not in latencies:
        raise RuntimeError(f"could not read wrk's output:\n{out}")
    return Run(float(rate.group(1)), latencies["50"], latencies["99"], errors)


async def prepare(database_url: str, products: int) -> str:
    """Migrate, load ``products`` products over 8 categories, return a client key."""
    from datetime import timedelta

    from commerce_api.accounts import service as accounts
    from commerce_api.catalog import repository
    from commerce_api.db import Database
    from commerce_api.ids import new_id
    from commerce_api.timestamps import utcnow

    db = Database(database_url)
    await db.migrate()
    now = utcnow()
    categories = ["books", "electronics", "apparel", "home", "toys", "grocery", "garden", "sport"]
    rows = [
        {
            "id": new_id("prod"),
            "name": f"Product {i}",
            "description": f"A generated product for benchmarks, number {i}.",
            "price_minor": 100 + (i * 37) % 10000,
            "category": categories[i % len(categories)],
            "inventory_count": 1_000_000,
            "created_at": now + timedelta(microseconds=i),
            "updated_at": now + timedelta(microseconds=i),
        }
        for i in range(products)
    ]
    async with db.write() as conn:
        for start in range(0, len(rows), 5000):
            await repository.insert_many(conn, rows[start : start + 5000])
        account = await accounts.create_account(conn, "Benchmark", "production")
        key = await accounts.create_key(conn, "sandbox", account_id=account)
    await db.dispose()
    return key.secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--products", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("make bench needs wrk: `sudo apt-get install wrk` (Debian/Ubuntu).")

    work = Path(tempfile.mkdtemp(prefix="commerce-bench-"))
    database_url = f"sqlite:///{work / 'bench.db'}"
    key = asyncio.run(prepare(database_url, args.products))
    auth = {"Authorization": f"Bearer {key}"}
    path = "/v1/products?limit=20"
    base_env = {
        **os.environ,
        "COMMERCE_DATABASE_URL": database_url,
        "COMMERCE_RATE_LIMIT_PRODUCTION": str(10**9),
        "COMMERCE_RATE_LIMIT_DEVELOPMENT": str(10**9),
    }
    base_env.pop("COMMERCE_REDIS_URL", None)

    def serve(port: int, **env: str) -> Any:
        command = [str(BIN / "commerce-api"), "serve", "--port", str(port), "--no-dispatcher"]
        return process(pinned(0, command), {**base_env, **env}, port)

    scenarios: dict[str, Scenario] = {}

    def measure(name: str, url: str, headers: dict[str, str]) -> None:
        wrk(url, headers, 2, args.connections)  # warm-up
        runs = [wrk(url, headers, args.duration, args.connections) for _ in range(args.rounds)]
        scenarios[name] = Scenario(name, runs)

    port = free_port()
    with serve(port):
        body = httpx.get(f"http://127.0.0.1:{port}{path}", headers=auth).content
        measure(
            "GET /v1/products?limit=20 (rate limiter on)", f"http://127.0.0.1:{port}{path}", auth
        )
    port = free_port()
    with serve(port, COMMERCE_RATE_LIMIT_ENABLED="false"):
        measure(
            "GET /v1/products?limit=20 (rate limiter off)", f"http://127.0.0.1:{port}{path}", auth
        )

    body_file = work / "ceiling-body.json"
    body_file.write_bytes(body)
    port = free_port()
    ceiling_command = [
        str(BIN / "uvicorn"),
        "bench.ceiling:app",
        "--port",
        str(port),
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    ceiling_env = {**base_env, "BENCH_CEILING_BODY": str(body_file), "PYTHONPATH": str(ROOT)}
    # The ceiling answers every path, /healthz included, so `process` can wait for it.
    with process(pinned(0, ceiling_command), ceiling_env, port):
        measure("ceiling app (same bytes)", f"http://127.0.0.1:{port}{path}", {})

    report(scenarios, args, len(body))
    shutil.rmtree(work, ignore_errors=True)


def report(scenarios: dict[str, Scenario], args: argparse.Namespace, body_bytes: int) -> None:
    ceiling = scenarios["ceiling app (same bytes)"].median("requests_per_second")
    on = scenarios["GET /v1/products?limit=20 (rate limiter on)"].median("requests_per_second")
    off = scenarios["GET /v1/products?limit=20 (rate limiter off)"].median("requests_per_second")
    lines = [
        f"Interpreter: {platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable}); {os.cpu_count()} CPUs; {args.connections} connections; "
        f"{args.rounds} rounds x {args.duration} s; {args.products} products; "
        f"page {body_bytes} bytes",
        "",
        "| scenario | req/s median (min–max) | p50 ms | p99 ms | x ceiling |",
        "|---|---|---|---|---|",
    ]
    for scenario in scenarios.values():
        low, high = scenario.spread("requests_per_second")
        rate = scenario.median("requests_per_second")
        lines.append(
            f"| {scenario.name} | {rate:,.0f} ({low:,.0f}–{high:,.0f}) | "
            f"{scenario.median('p50_ms'):.2f} | {scenario.median('p99_ms'):.2f} | "
            f"{rate / ceiling:.3f} |"
        )
    lines += ["", f"Rate limiter cost: limiter on = {on / off:.3f} x limiter off."]
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.md").write_text(text + "\n")
    (RESULTS / "latest.json").write_text(
        json.dumps(
            {
                "interpreter": sys.version,
                "args": vars(args),
                "scenarios": {
                    name: [asdict(run) for run in s.runs] for name, s in scenarios.items()
                },
                "ratios": {
                    name: s.median("requests_per_second") / ceiling for name, s in scenarios.items()
                },
                "rate_limiter_on_over_off": on / off,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
