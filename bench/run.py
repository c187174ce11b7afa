"""``make bench``: load-test the real service against a ceiling app; figures as ratios.

For each backend (the embedded default, SQLite; and PostgreSQL + Redis when reachable) and each
catalogue size, it generates a catalogue, starts ``commerce-api serve`` (one worker, pinned to
CPU 0 when ``taskset`` exists) and drives it with wrk from a separate process pinned to CPU 1.
In the same run it measures a ceiling app (``bench/ceiling.py``: a minimal ASGI app on the same
server answering the same bytes) and reports every figure as a ratio to it. The ceiling serves
beside the service, and each catalogue read alternates its rounds with the ceiling's, so that a
machine whose speed drifts over minutes (a shared VM's does) moves both sides of a ratio alike.

Scenarios: the first page of ``GET /v1/products``, with the rate limiter on and off; the last
page (a deep offset); a category's last page; ``GET /v1/products/{id}``; sorted pages
(``sort=price``, ``-price``, ``name`` with a category, first and deep) and searches (``q``: a
few matches; one product in nine matching, sorted, its last page); ``POST /v1/orders`` (each
request with its own Idempotency-Key). Each runs ``--rounds`` times: the median is
reported with min-max. The server's resident memory (RSS) is sampled after each scenario.

Webhook delivery: the orders above each make one delivery to a receiver on loopback
(``bench/receiver.py``, pinned to CPU 1, answering in 1 ms). After them one ``commerce-api
worker`` (one process, its dispatcher, pinned to CPU 0, with the cap on attempts in flight per
endpoint raised to its 400 slots) drains that outbox; its deliveries per second, counted by the
receiver over ``--duration`` seconds (less if the backlog would not last), are reported as a
ratio to the orders per second of the same run: at least 1 means one process delivers as fast
as it sells.

Before and after: ``--baseline DIR`` names another checkout of this repository with its own
installed venv (``DIR/.venv/bin/commerce-api``), say the commit before a change. Its ``serve``
runs beside ours (same settings; pinned alike; a copy of the same database, prepared at the
baseline's newest migration, which each ``serve`` upgrades to its own) and each read, the
create-order row and the flash sale's rows are measured again on it, in rounds alternating with
ours, as ``before: <scenario>`` rows; ``x before`` is our req/s over its (``x before by CPU``:
its CPU per request over ours).

Results: bench/results/latest.{json,md,png} (``--output`` names them), rewritten after each
backend and size, so an interrupted run keeps what it measured; a run to ``latest`` that ends
then rewrites the table of docs/performance.md (``bench/figures.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import figures
import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
RESULTS = ROOT / "bench" / "results"
POSTGRES_ADMIN_URL = os.environ.get(
    "COMMERCE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("COMMERCE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
# The name of a scenario measured on the ``--baseline`` checkout: "before: " + ours.
BEFORE = "before: "
CATEGORIES = ["books", "electronics", "apparel", "home", "toys", "grocery", "garden", "sport"]

# A fresh key per request, and per wrk run (the warm-up and each round start their counters
# anew): a reused key would measure idempotent replays, not orders. Each request orders one
# unit of a product drawn from ``ids`` (one id: always that product).
ORDER_SCRIPT = """
counter = 0
init = function(args)
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
  SEED = SEED .. "-" .. math.random(1, 1000000000)
end
request = function()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = "bench-" .. SEED .. "-" .. counter
  local body = BODY:gsub("PRODUCT", ids[math.random(#ids)])
  return wrk.format("POST", wrk.path, nil, body)
end
"""
ADDRESS = {
    "street": "1 Main Street",
    "city": "Springfield",
    "postal_code": "12345",
    "country": "US",
}


def order_body(product_id: str, customer_id: str) -> dict[str, Any]:
    """An order of one unit of ``product_id``."""
    return {
        "customer_id": customer_id,
        "items": [{"product_id": product_id, "quantity": 1}],
        "shipping_address": ADDRESS,
    }


def order_script(path: Path, product_ids: list[str], customer_id: str) -> str:
    """Write the wrk script that places orders for ``product_ids``; its path."""
    body = json.dumps(order_body("PRODUCT", customer_id))
    ids = ", ".join(json.dumps(product_id) for product_id in product_ids)
    path.write_text(
        f'SEED = "{secrets.token_hex(4)}"\nwrk.method = "POST"\n'
        f"BODY = {json.dumps(body)}\nids = {{{ids}}}\n"
        'wrk.headers["Content-Type"] = "application/json"\n' + ORDER_SCRIPT
    )
    return str(path)


@dataclass
class Run:
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    rss_mb: float = 0.0
    # The server's CPU time per request (µs): its own process and children, over the run.
    # Unlike req/s, it barely moves when other work shares the machine.
    cpu_us: float = 0.0
    # Responses wrk counted (2xx and not).
    requests: int = 0
    # wrk's socket errors (connect, read, write, timeout): requests that got no response.
    socket_errors: int = 0
    # The slowest response wrk counted (ms): a stall of a few requests that p99 does not show.
    max_ms: float = 0.0


@dataclass
class Scenario:
    backend: str
    products: int
    name: str
    path: str
    runs: list[Run] = field(default_factory=list)

    def median(self, attribute: str) -> float:
        return float(statistics.median(getattr(run, attribute) for run in self.runs))

    def spread(self, attribute: str) -> tuple[float, float]:
        values = [getattr(run, attribute) for run in self.runs]
        return min(values), max(values)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(cpu: int, command: list[str]) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(cpu), *command]
    return command


def with_children(pid: int) -> list[int]:
    """A process and its children (granian runs each worker in a child process)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [pid, *(int(p) for p in children.read_text().split())] if children.exists() else [pid]


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and its children."""
    total = 0.0
    for each in with_children(pid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, in MB."""
    total = 0
    for each in with_children(pid):
        status = Path(f"/proc/{each}/status")
        if status.exists():
            match = re.search(r"VmRSS:\s+(\d+) kB", status.read_text())
            total += int(match.group(1)) if match else 0
    return total / 1024


@contextmanager
def process(command: list[str], env: dict[str, str], port: int) -> Iterator[int]:
    with tempfile.TemporaryFile() as log:
        yield from run_process(command, env, port, log)


def run_process(command: list[str], env: dict[str, str], port: int, log: Any) -> Iterator[int]:
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)  # noqa: S603
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"{command} exited:\n{log.read().decode()[-2000:]}")
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("server did not start within 60 s") from None
                time.sleep(0.1)
        yield proc.pid
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()


_LATENCY = re.compile(r"^\s+(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_RATE = re.compile(r"^Requests/sec:\s+([\d.]+)", re.MULTILINE)
_NON_2XX = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
_REQUESTS = re.compile(r"^\s+(\d+) requests in", re.MULTILINE)
_MAX = re.compile(r"^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\s", re.MULTILINE)
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")


def wrk(
    url: str,
    headers: dict[str, str],
    seconds: int,
    connections: int,
    script: str = "",
    *,
    threads: int = 1,
    cpu: int | None = 1,
    timeout: int | None = None,
) -> Run:
    """One wrk run, pinned to ``cpu`` (None: not pinned); ``timeout``: wrk's per-request
    timeout in seconds (its default, 2 s, leaves slower requests out of the percentiles)."""
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if timeout is not None:
        command.append(f"--timeout={timeout}s")
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    if script:
        command += ["-s", script]
    command = [*command, url] if cpu is None else pinned(cpu, [*command, url])
    out = subprocess.run(  # noqa: S603
        command, capture_output=True, text=True, check=True
    ).stdout
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    latencies = {p: float(v) * scale[u] for p, v, u in _LATENCY.findall(out)}
    rate = _RATE.search(out)
    non_2xx = _NON_2XX.search(out)
    if rate is None or "50" not in latencies or "99" not in latencies:
        raise RuntimeError(f"could not read wrk's output:\n{out}")
    requests = _REQUESTS.search(out)
    socket_errors = _SOCKET_ERRORS.search(out)
    slowest = _MAX.search(out)
    return Run(
        float(rate.group(1)),
        latencies["50"],
        latencies["99"],
        int(non_2xx.group(1)) if non_2xx else 0,
        requests=int(requests.group(1)) if requests else 0,
        socket_errors=sum(map(int, socket_errors.groups())) if socket_errors else 0,
        max_ms=float(slowest.group(1)) * scale[slowest.group(2)] if slowest else 0.0,
    )


@dataclass
class Target:
    """What one scenario loads: a server's URL, the request headers, its process, wrk's script."""

    scenario: Scenario
    url: str
    headers: dict[str, str]
    pid: int
    lua: str = ""


def measure_side_by_side(targets: list[Target], args: argparse.Namespace, **placement: Any) -> None:
    """Each target warmed up, then ``args.rounds`` rounds of one wrk run per target in turn: a
    scenario and its ceiling measured seconds apart, so that a machine whose speed drifts
    (a shared VM's does, by several per cent over minutes) moves both alike."""
    for target in targets:
        wrk(target.url, target.headers, 2, args.connections, target.lua, **placement)
    for _ in range(args.rounds):
        for target in targets:
            started = cpu_seconds(target.pid)
            result = wrk(
                target.url, target.headers, args.duration, args.connections, target.lua, **placement
            )
            used = cpu_seconds(target.pid) - started
            result.rss_mb = rss_mb(target.pid)
            result.cpu_us = used / (result.requests_per_second * args.duration) * 1e6
            target.scenario.runs.append(result)


async def prepare(database_url: str, products: int, revision: str = "head") -> tuple[str, str]:
    """Migrate (to ``revision``: see :func:`shared_revision`), load the catalogue, return
    (client key, a product id)."""
    from commerce_api.accounts import service as accounts
    from commerce_api.core.ids import new_id
    from commerce_api.core.timestamps import utcnow
    from commerce_api.storage.db import Database
    from commerce_api.storage.tables import products as products_table

    db = Database(database_url)
    await migrate(db, revision)
    now = utcnow()
    rows = [
        {
            "id": new_id("prod"),
            "name": f"Product {i}",
            "description": f"A generated product for benchmarks, number {i}.",
            "price_minor": 100 + (i * 37) % 10000,
            "category": CATEGORIES[i % len(CATEGORIES)],
            "inventory_count": 10_000_000,
            "created_at": now + timedelta(microseconds=i),
            "updated_at": now + timedelta(microseconds=i),
        }
        for i in range(products)
    ]
    # The columns every schema since the first has (the database may be at the baseline's
    # revision, before products.change_seq): each serve's index is built from the rows alike.
    async with db.write() as conn:
        for start in range(0, len(rows), 5000):
            await conn.execute(products_table.insert(), rows[start : start + 5000])
        account = await accounts.create_account(conn, "Benchmark", "production")
        key = await accounts.create_key(conn, "sandbox", account_id=account)
    await db.dispose()
    return key.secret, str(rows[len(rows) // 2]["id"])


async def migrate(db: Any, revision: str) -> None:
    """Upgrade ``db`` (a ``Database``) to ``revision`` with the project's own migrations."""
    from alembic import command
    from sqlalchemy.engine import Connection

    from commerce_api.storage.migrations import alembic_config

    def upgrade(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    async with db.write() as conn:
        await conn.run_sync(upgrade)


def shared_revision(args: argparse.Namespace) -> str:
    """The schema the bench's databases are prepared at: with ``--baseline``, the baseline's
    newest migration (each ``serve`` then upgrades its own copy to its own head at start: a
    baseline that meets a revision it does not know refuses to start); else our head."""
    if args.baseline is None:
        return "head"
    from alembic.script import ScriptDirectory

    versions = Path(args.baseline) / "server" / "src" / "commerce_api" / "storage" / "migrations"
    head = ScriptDirectory(str(versions)).get_current_head()
    assert head is not None, f"no migrations in {versions}"
    return head


@contextmanager
def baseline_database(
    backend: str, database_url: str, path: Path, args: argparse.Namespace
) -> Iterator[str | None]:
    """With ``--baseline``, a copy of the prepared database for the baseline's ``serve`` (the
    same catalogue, accounts and keys; None without): a SQLite backup into ``path``, or a
    PostgreSQL database made from ours as its template, dropped at the end."""
    if args.baseline is None:
        yield None
        return
    if backend == "sqlite":
        import sqlite3

        source = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        copy = sqlite3.connect(path)
        with contextlib.closing(source), contextlib.closing(copy):
            source.backup(copy)
        yield f"sqlite:///{path}"
        return
    from sqlalchemy.engine import make_url

    template = make_url(database_url).database
    database_name, copy_url = asyncio.run(create_database(template))
    try:
        yield copy_url
    finally:
        asyncio.run(drop_database(database_name))


async def create_database(template: str | None = None) -> tuple[str, str]:
    import asyncpg
    from sqlalchemy.engine import make_url

    admin_dsn = make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql")
    name = f"commerce_bench_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(admin_dsn.render_as_string(False))
    copied = f' TEMPLATE "{template}"' if template else ""
    await conn.execute(f'CREATE DATABASE "{name}"{copied}')
    await conn.close()
    return name, make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(False)


async def drop_database(name: str) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url

    admin_dsn = make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql")
    conn = await asyncpg.connect(admin_dsn.render_as_string(False))
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


def postgres_and_redis_available() -> bool:
    async def check() -> bool:
        import asyncpg
        import redis.asyncio as redis
        from sqlalchemy.engine import make_url

        try:
            dsn = make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql")
            conn = await asyncpg.connect(dsn.render_as_string(False), timeout=3)
            await conn.close()
            client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
            await client.ping()  # type: ignore[misc]  # redis-py types ping as maybe-sync
            await client.aclose()
        except Exception:
            return False
        return True

    return asyncio.run(check())


@contextmanager
def bench_database(backend: str, path: Path) -> Iterator[str]:
    """The URL of a new database: a SQLite file at ``path``, or a PostgreSQL database of the
    bench's own, dropped at the end."""
    if backend == "sqlite":
        yield f"sqlite:///{path}"
        return
    database_name, database_url = asyncio.run(create_database())
    try:
        yield database_url
    finally:
        asyncio.run(drop_database(database_name))


def baseline_cli(args: argparse.Namespace) -> str:
    """The ``--baseline`` checkout's ``commerce-api``."""
    return str(Path(args.baseline) / ".venv" / "bin" / "commerce-api")


def baseline_env(env: dict[str, str], database_url: str | None) -> dict[str, str]:
    """Our server's environment for the baseline's: the same settings, its own copy of the
    database (:func:`baseline_database`) and Redis key prefix, and no PYTHONPATH that could
    lend it our code."""
    before = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    if database_url is not None:
        before["COMMERCE_DATABASE_URL"] = database_url
    if "COMMERCE_REDIS_KEY_PREFIX" in before:
        before["COMMERCE_REDIS_KEY_PREFIX"] = f"commerce-bench-before-{secrets.token_hex(4)}:"
    return before


def baseline_commit(directory: str) -> str:
    """The commit checked out in ``directory`` ("" if git cannot tell)."""
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        command = ["git", "-C", directory, "log", "-1", "--format=%h"]
        out = subprocess.run(command, capture_output=True, text=True, check=True)  # noqa: S603
        return out.stdout.strip()
    return ""


def bench_backend(
    backend: str, products: int, args: argparse.Namespace, work: Path
) -> list[Scenario]:
    with bench_database(backend, work / f"bench-{products}.db") as database_url:
        key, product_id = asyncio.run(prepare(database_url, products, shared_revision(args)))
        copy = work / f"bench-{products}-before.db"
        with baseline_database(backend, database_url, copy, args) as before_url:
            return measure_service(
                backend, products, (database_url, before_url), key, product_id, args, work
            )


def measure_service(
    backend: str,
    products: int,
    databases: tuple[str, str | None],
    key: str,
    product_id: str,
    args: argparse.Namespace,
    work: Path,
) -> list[Scenario]:
    database_url, before_database_url = databases
    auth = {"Authorization": f"Bearer {key}"}
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")},
        "COMMERCE_DATABASE_URL": database_url,
        "COMMERCE_RATE_LIMIT_PRODUCTION": str(10**9),
        "COMMERCE_RATE_LIMIT_DEVELOPMENT": str(10**9),
    }
    if backend == "postgresql":
        env["COMMERCE_REDIS_URL"] = REDIS_URL
        env["COMMERCE_REDIS_KEY_PREFIX"] = f"commerce-bench-{secrets.token_hex(4)}:"
    per_category = products // len(CATEGORIES)
    last_offset = max(products - 20, 0)
    category_offset = max(per_category - 20, 0)
    reads = [
        ("list, first page", "/v1/products?limit=20"),
        ("list, last page (deep offset)", f"/v1/products?limit=20&offset={last_offset}"),
        (
            "list, category + deep offset",
            f"/v1/products?category=books&limit=20&offset={category_offset}",
        ),
        ("product by id", f"/v1/products/{product_id}"),
    ]
    # Issue 31's catalogue parameters, rows of their own (no baseline twin: the code before
    # them refuses these queries). Sorted pages come from the snapshot like the rows above; a
    # search reads the full-text index, and costs what its matches cost (counted, then sorted
    # before the page is cut). Descriptions say "number <i>": `<products // 2>` begins one of
    # those words (or a few); `4` begins one in nine (4, 40-49, 400-499, …), its last page asked.
    few = products // 2
    ninth = sum(1 for i in range(products) if str(i).startswith("4"))
    searches = [
        ("list, sort=price, first page", "/v1/products?sort=price&limit=20"),
        (
            "list, sort=-price, deep offset",
            f"/v1/products?sort=-price&limit=20&offset={last_offset}",
        ),
        (
            "list, sort=name + category, deep offset",
            f"/v1/products?sort=name&category=books&limit=20&offset={category_offset}",
        ),
        ("search q, a few matches", f"/v1/products?q={few}&limit=20"),
        (
            "search q, 1 in 9 products match, sort=-price, last page",
            f"/v1/products?q=4&sort=-price&limit=20&offset={max(ninth - 20, 0)}",
        ),
    ]
    script = order_script(work / "orders.lua", [product_id], "cus_bench")
    scenarios: list[Scenario] = []

    receiver_port = free_port()
    receiver = [sys.executable, str(ROOT / "bench" / "receiver.py"), str(receiver_port)]
    env["COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS"] = "true"
    # The delivery row measures the dispatcher, whose backlog all goes to one endpoint: with the
    # default cap of 10 attempts in flight per endpoint it would measure the cap instead (one
    # endpoint then gets at most 10 per receiver latency plus the ~20 ms between claims).
    env["COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT"] = "400"
    receiver_url = f"http://127.0.0.1:{receiver_port}"

    def serve(port: int, **extra: str) -> AbstractContextManager[int]:
        command = [str(BIN / "commerce-api"), "serve", "--port", str(port), "--no-dispatcher"]
        return process(pinned(0, command), {**env, **extra}, port)

    def serve_before(port: int, **extra: str) -> AbstractContextManager[int | None]:
        """The baseline's ``serve`` beside ours (None without ``--baseline``)."""
        if args.baseline is None:
            return contextlib.nullcontext()
        command = [baseline_cli(args), "serve", "--port", str(port), "--no-dispatcher"]
        before_env = baseline_env(env, before_database_url)
        return process(pinned(0, command), {**before_env, **extra}, port)

    def target(name: str, url: str, headers: dict[str, str], pid: int, lua: str = "") -> Target:
        scenario = Scenario(backend, products, name, url.split(":", 2)[2].split("/", 1)[1])
        scenarios.append(scenario)
        return Target(scenario, url, headers, pid, lua)

    port = free_port()
    before_port = free_port()
    before_base = f"http://127.0.0.1:{before_port}"
    ceiling_port = free_port()
    # The same server as `serve`, with the same options (bench/ceiling.py).
    ceiling = [sys.executable, "-m", "bench.ceiling", str(ceiling_port)]
    ceiling_env = {
        **env,
        "BENCH_CEILING_LIST": str(work / "list.json"),
        "BENCH_CEILING_DETAIL": str(work / "detail.json"),
        "PYTHONPATH": str(ROOT),
    }
    ceiling_base = f"http://127.0.0.1:{ceiling_port}"
    with (
        process(pinned(1, receiver), env, receiver_port),
        serve(port) as pid,
        serve_before(before_port) as before_pid,
    ):
        base = f"http://127.0.0.1:{port}"
        wait_for_snapshot(base, auth, reads[1][1])
        if before_pid is not None:
            wait_for_snapshot(before_base, auth, reads[1][1])
        (work / "list.json").write_bytes(httpx.get(base + reads[0][1], headers=auth).content)
        (work / "detail.json").write_bytes(httpx.get(base + reads[3][1], headers=auth).content)
        # The ceiling app serves beside the service (each idle while the other is loaded): a
        # read and the ceiling it is compared with are measured in alternate rounds.
        with process(pinned(0, ceiling), ceiling_env, ceiling_port) as ceiling_pid:
            list_ceiling = target(
                "ceiling: list page bytes", ceiling_base + reads[0][1], {}, ceiling_pid
            )
            detail_ceiling = target(
                "ceiling: product bytes", ceiling_base + reads[3][1], {}, ceiling_pid
            )
            for name, path in reads:
                ceiling_target = detail_ceiling if path == reads[3][1] else list_ceiling
                targets = [target(name, base + path, auth, pid)]
                if before_pid is not None:  # rounds: ours, the baseline's, the ceiling's
                    targets.append(target(BEFORE + name, before_base + path, auth, before_pid))
                measure_side_by_side([*targets, ceiling_target], args)
            for name, path in searches:
                measure_side_by_side([target(name, base + path, auth, pid), list_ceiling], args)
        # Each order makes a delivery on both sides: the baseline's database is a copy made
        # before this endpoint, so it is given one of its own.
        endpoint = {"url": receiver_url + "/hook", "events": ["order.created"]}
        for side in (base, before_base) if before_pid is not None else (base,):
            httpx.post(
                side + "/v1/webhook_endpoints", headers=auth, json=endpoint
            ).raise_for_status()
        orders = [target("create order", base + "/v1/orders", auth, pid, script)]
        if before_pid is not None:  # a copy of the same database; the script's keys its own
            before_script = order_script(work / "orders-before.lua", [product_id], "cus_bench")
            orders.append(
                target(
                    BEFORE + "create order",
                    before_base + "/v1/orders",
                    auth,
                    before_pid,
                    before_script,
                )
            )
        measure_side_by_side(orders, args)
    with process(pinned(1, receiver), env, receiver_port):
        scenarios.append(drain_outbox(backend, products, env, receiver_url, args, database_url))
    port = free_port()
    before_port = free_port()
    before_base = f"http://127.0.0.1:{before_port}"
    off = "false"
    with (
        serve(port, COMMERCE_RATE_LIMIT_ENABLED=off) as pid,
        serve_before(before_port, COMMERCE_RATE_LIMIT_ENABLED=off) as before_pid,
    ):
        base = f"http://127.0.0.1:{port}"
        wait_for_snapshot(base, auth, reads[1][1])
        name = "list, first page, rate limiter off"
        targets = [target(name, base + reads[0][1], auth, pid)]
        if before_pid is not None:
            wait_for_snapshot(before_base, auth, reads[1][1])
            targets.append(target(BEFORE + name, before_base + reads[0][1], auth, before_pid))
        measure_side_by_side(targets, args)

    return scenarios


HOT = "flash sale: one hot product (2 processes)"
SPREAD = "flash sale: spread over 1,000 products (2 processes)"
SELL_OUT_UNITS = 500
SELL_OUT_BUYERS = 64


def bench_flash_sale(backend: str, args: argparse.Namespace, work: Path) -> list[Scenario]:
    """Orders from two ``serve`` processes: all for one hot product, then spread over 1,000
    products; then the sell-out check (see :func:`sell_out`)."""
    with (
        bench_database(backend, work / "flash-sale.db") as database_url,
        contextlib.ExitStack() as copies,
    ):
        key, hot = asyncio.run(prepare(database_url, 1000, shared_revision(args)))
        ids, sell_out_id = asyncio.run(flash_sale_products(database_url))
        copy = work / "flash-sale-before.db"
        before_url = copies.enter_context(baseline_database(backend, database_url, copy, args))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")},
            "COMMERCE_DATABASE_URL": database_url,
            "COMMERCE_RATE_LIMIT_ENABLED": "false",
            # Two workers share rate-limit counters through Redis (the CLI insists), even
            # with the limiter off, as the operator contract has it.
            "COMMERCE_REDIS_URL": REDIS_URL,
            "COMMERCE_REDIS_KEY_PREFIX": f"commerce-bench-{secrets.token_hex(4)}:",
        }
        port = free_port()
        command = [str(BIN / "commerce-api"), "serve", "--port", str(port)]
        command += ["--workers", str(args.flash_sale_workers), "--no-dispatcher"]
        headers = {"Authorization": f"Bearer {key}"}
        scenarios: list[Scenario] = []
        before_port = free_port()
        before: AbstractContextManager[int | None] = contextlib.nullcontext()
        if args.baseline is not None:  # a copy of the database; Redis, its own key prefix
            before_command = [baseline_cli(args), "serve", "--port", str(before_port)]
            before_command += command[command.index("--workers") :]
            before = process(before_command, baseline_env(env, before_url), before_port)
        with process(command, env, port) as pid:
            url = f"http://127.0.0.1:{port}/v1/orders"
            # The baseline's processes idle while ours are loaded, and ours while its are.
            with before as before_pid:
                for name, products in ((HOT, [hot]), (SPREAD, ids)):
                    script = order_script(work / "flash.lua", products, "cus_flash")
                    scenario = Scenario(backend, 1000, name, "/v1/orders")
                    scenarios.append(scenario)
                    targets = [Target(scenario, url, headers, pid, script)]
                    if before_pid is not None:
                        lua = order_script(work / "flash-before.lua", products, "cus_flash")
                        twin = Scenario(backend, 1000, BEFORE + name, "/v1/orders")
                        scenarios.append(twin)
                        before_url = f"http://127.0.0.1:{before_port}/v1/orders"
                        targets.append(Target(twin, before_url, headers, before_pid, lua))
                    measure_side_by_side(targets, args, threads=2, cpu=None)
            exact = asyncio.run(sell_out(f"http://127.0.0.1:{port}", key, sell_out_id))
        SELL_OUT_RESULTS.append(f"{backend}: {exact}")
        return scenarios


async def flash_sale_products(database_url: str) -> tuple[list[str], str]:
    """The catalogue's product ids, and a new product with ``SELL_OUT_UNITS`` in stock."""
    from sqlalchemy import select

    from commerce_api.core.ids import new_id
    from commerce_api.core.timestamps import utcnow
    from commerce_api.storage.db import Database
    from commerce_api.storage.tables import products

    db = Database(database_url)
    async with db.write() as conn:
        ids: list[str] = list((await conn.scalars(select(products.c.id))).all())
        sell_out_id = new_id("prod")
        now = utcnow()
        row = {
            "id": sell_out_id,
            "name": "Limited edition",
            "description": "Sold out in seconds.",
            "price_minor": 9900,
            "category": "apparel",
            "inventory_count": SELL_OUT_UNITS,
            "created_at": now,
            "updated_at": now,
        }
        await conn.execute(products.insert(), [row])  # every schema's columns (``prepare``)
    await db.dispose()
    return ids, sell_out_id


async def sell_out(base: str, key: str, product_id: str) -> str:
    """``SELL_OUT_BUYERS`` buyers each order one unit at a time until the product is out of
    stock (a 409): exactly ``SELL_OUT_UNITS`` orders must succeed and the stock end at 0."""
    body = order_body(product_id, "cus_sell_out")
    headers = {"Authorization": f"Bearer {key}"}
    placed = 0
    unexpected: list[int] = []
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:

        async def buyer() -> None:
            nonlocal placed
            for _ in range(SELL_OUT_UNITS + 1):  # bounded: one buyer could take every unit
                response = await client.post(
                    "/v1/orders", json=body, headers={"Idempotency-Key": secrets.token_hex(16)}
                )
                if response.status_code == 201:
                    placed += 1
                elif response.status_code == 409:
                    return
                else:
                    unexpected.append(response.status_code)
                    return

        await asyncio.gather(*(buyer() for _ in range(SELL_OUT_BUYERS)))
        stock = (await client.get(f"/v1/products/{product_id}")).json()["inventory_count"]
        listed = await client.get("/v1/orders", params={"customer_id": "cus_sell_out", "limit": 1})
        total = listed.json()["pagination"]["total"]
    if unexpected or placed != SELL_OUT_UNITS or total != SELL_OUT_UNITS or stock != 0:
        raise RuntimeError(
            f"sell-out not exact: {placed} orders answered 201, {total} stored, stock {stock}, "
            f"other statuses {unexpected[:10]}"
        )
    return (
        f"{SELL_OUT_BUYERS} buyers of one unit each, {SELL_OUT_UNITS} units: {placed} orders "
        f"answered 201, {total} stored, stock {stock} (exact)"
    )


SELL_OUT_RESULTS: list[str] = []


def drain_outbox(
    backend: str,
    products: int,
    env: dict[str, str],
    receiver_url: str,
    args: argparse.Namespace,
    database_url: str,
) -> Scenario:
    """One ``commerce-api worker`` delivering the backlog the orders left: deliveries/s per
    round, counted by the receiver. A faster worker would run out of backlog before
    ``--rounds`` rounds of ``--duration`` seconds: after a 1 s warm-up that measures the rate,
    the rounds are shortened to fit in four fifths of what is left, and each round is timed to
    its last delivery."""
    scenario = Scenario(backend, products, "deliver webhooks (one worker)", "outbox")
    backlog = asyncio.run(outbox_depth(database_url))
    command = pinned(0, [str(BIN / "commerce-api"), "worker"])
    quiet = subprocess.DEVNULL
    worker = subprocess.Popen(command, env=env, stdout=quiet, stderr=quiet)  # noqa: S603

    def delivered() -> tuple[int, float]:
        """The receiver's count, and when it got the last of them."""
        count, last = httpx.get(receiver_url + "/count", timeout=5).text.split()
        return int(count), float(last)

    try:
        before, _ = delivered()
        started = time.monotonic()
        while delivered()[0] == before and time.monotonic() - started < 30:
            time.sleep(0.05)  # the worker starts
        count, started = delivered()
        time.sleep(1)  # warm-up, and a first estimate of the rate
        after, last = delivered()
        # At least one a second: a worker that delivered nothing in its first second (a busy
        # machine) is measured for the full duration, not divided by zero.
        rate = max((after - count) / max(last - started, 0.001), 1.0)
        seconds = min(float(args.duration), 0.8 * (backlog - after) / rate / args.rounds)
        if seconds < args.duration:
            print(
                f"   outbox of {backlog:,}: {args.rounds} rounds of {seconds:.1f} s "
                f"(at ~{rate:,.0f}/s)",
                flush=True,
            )
        for _ in range(args.rounds):
            before, started = delivered()[0], time.monotonic()
            time.sleep(seconds)
            after, last = delivered()
            if after == before:
                if scenario.runs:  # the backlog ran out early (a busy machine's rounds)
                    break
                raise RuntimeError("the worker delivered nothing (an empty outbox?)")
            rate = (after - before) / (last - started)
            scenario.runs.append(Run(rate, 0.0, 0.0, 0, rss_mb(worker.pid)))
    finally:
        stop(worker)
    return scenario


async def outbox_depth(database_url: str) -> int:
    """Pending deliveries in the outbox."""
    from sqlalchemy import func, select

    from commerce_api.storage.db import Database
    from commerce_api.storage.tables import webhook_deliveries

    db = Database(database_url)
    async with db.read() as conn:
        query = select(func.count()).where(webhook_deliveries.c.status == "pending")
        depth = int(await conn.scalar(query) or 0)
    await db.dispose()
    return depth


def wait_for_snapshot(base: str, auth: dict[str, str], probe: str) -> None:
    """Let the catalogue snapshot build before measuring (bounded): the deep-offset page is
    slow from the database and fast from the snapshot."""
    deadline = time.monotonic() + 60
    fast = 0
    with httpx.Client(base_url=base, headers=auth) as client:
        while time.monotonic() < deadline and fast < 3:
            started = time.perf_counter()
            client.get(probe)
            fast = fast + 1 if time.perf_counter() - started < 0.010 else 0
            time.sleep(0.1)


def ceiling_of(scenario: Scenario, scenarios: list[Scenario]) -> Scenario | None:
    """What a scenario is measured against: the ceiling app answering the same bytes; for the
    delivery scenario, the orders per second of the same run; for the hot flash-sale row, the
    spread row. A ``before:`` row's: the same ceiling app, or the ``before:`` twin of the row."""
    twin = BEFORE if scenario.name.startswith(BEFORE) else ""
    name = scenario.name.removeprefix(BEFORE)
    if name.startswith("deliver"):
        ceiling_name = twin + "create order"
    elif name == HOT:
        ceiling_name = twin + SPREAD
    elif name == SPREAD:
        return None
    elif "by id" in name:
        ceiling_name = "ceiling: product bytes"
    else:
        ceiling_name = "ceiling: list page bytes"
    return _named(ceiling_name, scenario, scenarios)


def _named(name: str, scenario: Scenario, scenarios: list[Scenario]) -> Scenario | None:
    """The scenario called ``name`` of the same backend and catalogue size as ``scenario``."""
    for other in scenarios:
        if (other.backend, other.products, other.name) == (
            scenario.backend,
            scenario.products,
            name,
        ):
            return other
    return None


def before_of(scenario: Scenario, scenarios: list[Scenario]) -> Scenario | None:
    """The same scenario measured on the ``--baseline`` checkout, if it was."""
    if scenario.name.startswith(BEFORE) or "ceiling" in scenario.name:
        return None
    return _named(BEFORE + scenario.name, scenario, scenarios)


def ratio_to_before(scenario: Scenario, scenarios: list[Scenario]) -> float | None:
    """Our req/s over the baseline's (medians): above 1, the change made it faster."""
    before = before_of(scenario, scenarios)
    if before is None:
        return None
    return scenario.median("requests_per_second") / before.median("requests_per_second")


def cpu_ratio_to_before(scenario: Scenario, scenarios: list[Scenario]) -> float | None:
    """The baseline's CPU per request over ours (medians): above 1, the change saves CPU."""
    before = before_of(scenario, scenarios)
    if before is None:
        return None
    mine, theirs = scenario.median("cpu_us"), before.median("cpu_us")
    return theirs / mine if mine and theirs else None


def ratio_to_ceiling(scenario: Scenario, scenarios: list[Scenario]) -> float | None:
    """Median over median."""
    ceiling = ceiling_of(scenario, scenarios)
    if ceiling is None:
        return None
    return scenario.median("requests_per_second") / ceiling.median("requests_per_second")


def cpu_ratio_to_ceiling(scenario: Scenario, scenarios: list[Scenario]) -> float | None:
    """The ceiling's CPU per request over the scenario's (medians): the ratio req/s would
    show if each had the CPU to itself — what a busy machine cannot blur."""
    ceiling = ceiling_of(scenario, scenarios)
    name = scenario.name.removeprefix(BEFORE)
    if ceiling is None or "ceiling" in name or name.startswith("deliver"):
        return None
    mine, theirs = scenario.median("cpu_us"), ceiling.median("cpu_us")
    return theirs / mine if mine and theirs else None


def ratio_spread(scenario: Scenario, scenarios: list[Scenario]) -> tuple[float, float] | None:
    """The lowest and highest ratio the rounds allow: worst round over the best ceiling round,
    best round over the worst."""
    ceiling = ceiling_of(scenario, scenarios)
    if ceiling is None:
        return None
    low, high = scenario.spread("requests_per_second")
    ceiling_low, ceiling_high = ceiling.spread("requests_per_second")
    return low / ceiling_high, high / ceiling_low


def report(scenarios: list[Scenario], args: argparse.Namespace, *, final: bool = True) -> None:
    baseline = args.baseline is not None
    lines = [
        f"Interpreter: {platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable}); {os.cpu_count()} CPUs; wrk -t1 -c{args.connections}; "
        f"{args.rounds} rounds x {args.duration} s; server pinned to CPU 0, wrk to CPU 1; "
        f"{args.date} at {args.commit or '?'} on {args.machine}",
        "",
        "| backend | products | scenario | req/s median (min-max) | p50 ms | p99 ms "
        "| x ceiling median (min-max) | CPU µs/request | x ceiling by CPU "
        + ("| x before | x before by CPU " if baseline else "")
        + "| RSS MB | non-2xx |",
        "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if baseline else ""),
    ]
    if baseline:
        commit = baseline_commit(args.baseline)
        lines[0] += f"; baseline {args.baseline}" + (f" at {commit}" if commit else "")
    for s in scenarios:
        low, high = s.spread("requests_per_second")
        ratio = ratio_to_ceiling(s, scenarios)
        spread = ratio_spread(s, scenarios)
        shown = ""
        if ratio is not None and spread is not None and "ceiling" not in s.name:
            shown = f"{ratio:.3f} ({spread[0]:.3f}-{spread[1]:.3f})"
        lines.append(
            f"| {s.backend} | {s.products:,} | {s.name} | "
            f"{s.median('requests_per_second'):,.0f} ({low:,.0f}-{high:,.0f}) | "
            f"{s.median('p50_ms'):.2f} | {s.median('p99_ms'):.2f} | "
            f"{shown} | "
            f"{s.median('cpu_us'):.1f} | {_optional(cpu_ratio_to_ceiling(s, scenarios))} | "
            + (
                f"{_optional(ratio_to_before(s, scenarios))} | "
                f"{_optional(cpu_ratio_to_before(s, scenarios))} | "
                if baseline
                else ""
            )
            + f"{s.median('rss_mb'):.0f} | {sum(r.non_2xx for r in s.runs)} |"
        )
    lines += [
        "",
        "CPU µs/request is the server's CPU time over the requests wrk counted; x ceiling by "
        "CPU is the ceiling's over ours, the ratio req/s would show on an otherwise idle "
        "machine (req/s ratios move with whatever else runs).",
        "",
        "The delivery row is deliveries/s of one worker draining the orders' outbox to a "
        "receiver that answers in 1 ms; its ratio is to the create-order row (x orders/s), "
        "not to a ceiling.",
    ]
    if baseline:
        lines += [
            "",
            "`before:` rows: the same scenario on the baseline checkout's `serve` (same settings, "
            "a copy of the same database), measured in rounds alternating with ours; x before is "
            "our req/s over its (medians), x before by CPU its CPU µs/request over ours: above 1, "
            "this code is faster.",
        ]
    hot = {s.backend: s for s in scenarios if s.name == HOT}
    if hot:
        lines += [
            "",
            "Flash sale: two `serve` processes, wrk -t2 -c32 unpinned, rate limits off; the hot "
            "row's ratio is to the spread row of the same backend.",
        ]
    if "sqlite" in hot and "postgresql" in hot:
        low, high = hot["postgresql"].spread("requests_per_second")
        sqlite_low, sqlite_high = hot["sqlite"].spread("requests_per_second")
        median = hot["postgresql"].median("requests_per_second") / hot["sqlite"].median(
            "requests_per_second"
        )
        lines.append(
            f"PostgreSQL hot-product orders/s x SQLite's: {median:.2f} "
            f"({low / sqlite_high:.2f}-{high / sqlite_low:.2f})"
        )
    lines += [f"Sell-out, {result}" for result in SELL_OUT_RESULTS]
    text = "\n".join(lines)
    if final:
        print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.output}.md").write_text(text + "\n")
    (RESULTS / f"{args.output}.json").write_text(
        json.dumps(
            {
                "interpreter": sys.version,
                "executable": sys.executable,
                "args": vars(args),
                "scenarios": [
                    {
                        **{k: v for k, v in asdict(s).items() if k != "runs"},
                        "runs": [asdict(r) for r in s.runs],
                        "ratio_to_ceiling": ratio_to_ceiling(s, scenarios),
                        "ratio_to_ceiling_spread": ratio_spread(s, scenarios),
                        "cpu_ratio_to_ceiling": cpu_ratio_to_ceiling(s, scenarios),
                        **(
                            {
                                "ratio_to_before": ratio_to_before(s, scenarios),
                                "cpu_ratio_to_before": cpu_ratio_to_before(s, scenarios),
                            }
                            if baseline
                            else {}
                        ),
                    }
                    for s in scenarios
                ],
            },
            indent=2,
        )
    )
    chart(scenarios, RESULTS / f"{args.output}.png")


def _optional(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio:.3f}"


def chart(scenarios: list[Scenario], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [s for s in scenarios if "ceiling" not in s.name]
    labels = [f"{s.backend} {s.products:,}\n{s.name}" for s in measured]
    ratios = [ratio_to_ceiling(s, scenarios) or 0.0 for s in measured]
    figure, axis = plt.subplots(figsize=(12, 0.45 * len(labels) + 1.5))
    axis.barh(range(len(labels)), ratios, color="#3b7dd8")
    axis.axvline(0.5, color="#d83b3b", linestyle="--", label="target 0.5 x ceiling (reads)")
    axis.set_yticks(range(len(labels)), labels, fontsize=7)
    axis.invert_yaxis()
    axis.set_xlabel("requests/s as a ratio to the ceiling app (same bytes, same server)")
    for index, s in enumerate(measured):
        axis.text(
            ratios[index] + 0.005,
            index,
            f"{s.median('requests_per_second'):,.0f}/s  p99 {s.median('p99_ms'):.1f} ms",
            va="center",
            fontsize=7,
        )
    axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000", help="catalogue sizes, comma-separated")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--output", default="latest", help="bench/results/<output>.{md,json,png}")
    parser.add_argument(
        "--suites", default="reads,flash-sale", help="reads (per catalogue size), flash-sale"
    )
    parser.add_argument("--flash-sale-workers", type=int, default=2, help="serve --workers")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="another checkout with its venv installed (make -C DIR install): its serve is "
        "measured beside ours, as 'before:' rows",
    )
    args = parser.parse_args()
    # What the figures were taken on, kept in the JSON's args (bench/figures.py shows them).
    args.date, args.machine = f"{datetime.now(UTC):%Y-%m-%d}", figures.machine()
    args.commit = baseline_commit(str(ROOT))
    if shutil.which("wrk") is None:
        sys.exit("make bench needs wrk: `sudo apt-get install wrk` (Debian/Ubuntu).")
    if args.baseline is not None:
        args.baseline = str(Path(args.baseline).resolve())
        args.baseline_commit = baseline_commit(args.baseline)
        if not os.access(baseline_cli(args), os.X_OK):
            sys.exit(
                f"--baseline {args.baseline}: no {baseline_cli(args)} "
                f"(`make -C {args.baseline} install` makes it)."
            )
    backends = args.backends.split(",")
    if "postgresql" in backends and not postgres_and_redis_available():
        print("PostgreSQL or Redis unreachable: measuring the embedded default only.")
        backends = [b for b in backends if b != "postgresql"]
    work = Path(tempfile.mkdtemp(prefix="commerce-bench-"))
    scenarios: list[Scenario] = []
    suites = args.suites.split(",")
    try:
        for backend in backends:
            for size in (int(s) for s in args.sizes.split(",")) if "reads" in suites else ():
                print(f"== {backend}, {size:,} products", flush=True)
                scenarios += bench_backend(backend, size, args, work)
                report(scenarios, args, final=False)  # a partial run still leaves its figures
        for backend in backends if "flash-sale" in suites else ():
            print(f"== {backend}, flash sale", flush=True)
            scenarios += bench_flash_sale(backend, args, work)
            report(scenarios, args, final=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(scenarios, args)
    if args.output == "latest":
        figures.update()  # the table of docs/performance.md


if __name__ == "__main__":
    main()
