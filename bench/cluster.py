"""``make cluster``: the service scaled out over simulated hosts, with a round trip between the
API hosts and the database; figures as ratios to the same path with no added delay.

Hosts are network namespaces on this machine (``bench/cluster_hosts.py``): a database host
with its own PostgreSQL and Redis, two API hosts (``commerce-api serve --no-dispatcher``), a
worker host (``commerce-api worker``); the load (wrk) runs in the root namespace and reaches
the API hosts over veth pairs with no added delay. Each app host's link to the database host
goes through a user-space delay line (``bench/delayline.py``: this kernel has no netem), set
per run to a round trip of 0, 0.5 and 2 ms (``--rtts``). Ratios are to the 0 ms run, which goes
through the same line, so the line's own CPU is not counted against the delay.

At each round trip: catalogue reads (the first page of the list; a product by id), then orders
(one unit each, a fresh Idempotency-Key each) for one hot product and spread over 1,000
products, with wrk against both API hosts at once (``--connections`` each), ``--rounds`` times,
each round running a scenario at every round trip in turn (the medians). It reports req/s,
the orders' p99, and the database round trips per order (the delay line's count of app ->
database turns on the PostgreSQL flows of the two API hosts' links, over the orders stored).
Afterwards it checks in SQL on the database host: every product's stock is its initial stock
minus the units of its orders; every order has exactly one ``order.created`` event; each order
run stored at least the orders wrk saw answered 2xx, and no more than those plus the requests
in flight when wrk stopped. Then the faults, at the last round trip (``--faults``, default
a,b,c,d,e; ``--faults-only``: no measurements), and their table: ``bench/cluster_faults.py``.
Any failure: exit status 1 (the tables are written anyway).

Results: ``bench/results/cluster.md`` (``--output``). Needs root, wrk, redis-server and
PostgreSQL's binaries; everything it makes (namespaces, links, processes, files) is named with
``--prefix`` (default ``cl<pid>``) and removed on exit, failure, SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import httpx
from cluster_faults import run_faults
from cluster_hosts import API_PORT, PG_PORT, REDIS_PORT, Hosts, cpu_seconds, sh
from cluster_load import FAULT_ENV, FAULTS
from run import BIN, RESULTS, ROOT, Run, order_body, order_script, prepare, wrk

READS = {"list": "/v1/products?limit=20", "by id": "/v1/products/{id}"}
ORDERS = ("orders hot", "orders spread")
# Products whose stock is not their initial stock (10,000,000: bench/run.py's prepare) minus
# the units of their orders (canceled ones gave theirs back).
WRONG_STOCK = (
    "SELECT p.id, p.inventory_count, COALESCE(s.units, 0) FROM products p LEFT JOIN "
    "(SELECT i.product_id, SUM(i.quantity) AS units FROM order_items i JOIN orders o "
    "ON o.id = i.order_id WHERE o.status <> 'canceled' GROUP BY i.product_id) s "
    "ON s.product_id = p.id WHERE p.inventory_count <> 10000000 - COALESCE(s.units, 0)"
)


@dataclass
class Row:
    """One round trip's figures: each scenario's runs (one a round), medians reported."""

    rtt_ms: float
    measured_rtt_ms: float = 0.0
    runs: dict[str, list[Run]] = field(default_factory=dict)
    turns: dict[str, int] = field(default_factory=dict)  # the order runs' round trips
    stored: dict[str, int] = field(default_factory=dict)  # and the orders they stored
    lone_round_trips: float = 0.0
    line_cpu_s: float = 0.0

    def rate(self, name: str) -> float:
        return statistics.median(run.requests_per_second for run in self.runs[name])

    def p99_ms(self, name: str) -> float:
        return statistics.median(run.p99_ms for run in self.runs[name])

    def round_trips(self, name: str) -> float:
        stored = self.stored.get(name, 0)
        return self.turns.get(name, 0) / stored if stored else 0.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtts", default="0,0.5,2", help="round trips (ms), comma-separated")
    parser.add_argument("--duration", type=int, default=3, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs per scenario and RTT")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections per host")
    parser.add_argument("--smoke", action="store_true", help="RTT 0 and 0.5 ms, 1 s each")
    parser.add_argument("--faults", help="a,b,c,d,e (--smoke: none): bench/cluster_faults.py")
    parser.add_argument("--faults-only", action="store_true", help="no measurements")
    parser.add_argument("--prefix", default=f"cl{os.getpid()}", help="names of what it makes")
    parser.add_argument("--output", type=Path, default=RESULTS / "cluster.md")
    args = parser.parse_args()
    if args.smoke:
        args.rtts, args.duration, args.rounds = "0,0.5", 1, 1
    args.faults = args.faults or ("none" if args.smoke else ",".join(FAULTS))
    args.rtt_list = [float(rtt) for rtt in args.rtts.split(",")]
    args.fault_list = [] if args.faults == "none" else args.faults.split(",")
    if any(fault not in FAULTS for fault in args.fault_list):
        parser.error(f"--faults: a comma-separated list of {', '.join(FAULTS)}, or none")
    if len(args.prefix) > 9:
        parser.error("--prefix: at most 9 characters (interface names)")
    return args


class Bench:
    def __init__(self, hosts: Hosts, args: argparse.Namespace) -> None:
        self.hosts = hosts
        self.args = args
        self.failures: list[str] = []
        self.key = ""
        self.hot = ""
        self.ids: list[str] = []
        self.apps: dict[str, subprocess.Popen[bytes]] = {}
        self.extra: dict[str, str] = {}

    def start(self) -> None:
        hosts = self.hosts
        admin_url = f"postgresql://postgres@{hosts.root_link('db')}:{PG_PORT}/postgres"
        # Migrates (bench/run.py's prepare: the project's migrations), loads 1,000 products.
        self.key, self.hot = asyncio.run(prepare(admin_url, 1000))
        self.ids = [row[0] for row in hosts.sql("SELECT id FROM products ORDER BY id")]
        self.start_apps(FAULT_ENV if self.args.faults_only else {})

    def start_apps(self, extra: dict[str, str]) -> None:
        """(Re)start the API hosts' and the worker's processes with ``extra`` in their
        environment (unless they run with it); wait until the API hosts answer."""
        if self.apps and extra == self.extra:
            return
        self.extra = extra
        for proc in self.apps.values():
            self.hosts.stop(proc)
        for host in ("api1", "api2", "worker"):
            self.apps[host] = self.spawn_app(host, extra)
        for host in ("api1", "api2"):
            self.hosts.wait_healthy(f"{self.base_url(host)}/healthz")

    def app_env(self, host: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a process of the service on ``host``."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
        db = self.hosts.db_address(host)
        return {
            **base,
            "COMMERCE_RATE_LIMIT_ENABLED": "false",
            "COMMERCE_DATABASE_URL": f"postgresql://postgres@{db}:{PG_PORT}/postgres",
            "COMMERCE_REDIS_URL": f"redis://{db}:{REDIS_PORT}/0",
            **(extra or {}),
        }

    def spawn_app(self, host: str, extra: dict[str, str]) -> subprocess.Popen[bytes]:
        """``serve --no-dispatcher`` on an API host, ``worker`` on the worker host."""
        command = [str(BIN / "commerce-api"), "worker"]
        if host != "worker":
            command = [str(BIN / "commerce-api"), "serve", "--no-dispatcher"]
            command += ["--host", self.hosts.root_link(host), "--port", str(API_PORT)]
        return self.hosts.spawn(host, command, f"{host}.log", self.app_env(host, extra))

    def base_url(self, host: str) -> str:
        return f"http://{self.hosts.root_link(host)}:{API_PORT}"

    def load(self, path: str, script: dict[str, str] | None = None, seconds: int = 0) -> Run:
        """wrk against both API hosts at once; req/s summed, the worse p99 and p50."""
        headers = {"Authorization": f"Bearer {self.key}"}
        duration = seconds or self.args.duration
        with ThreadPoolExecutor(2) as pool:
            runs = list(
                pool.map(
                    lambda host: wrk(
                        self.base_url(host) + path,
                        headers,
                        duration,
                        self.args.connections,
                        (script or {}).get(host, ""),
                        cpu=None,
                    ),
                    ("api1", "api2"),
                )
            )
        total = Run(
            sum(run.requests_per_second for run in runs),
            max(run.p50_ms for run in runs),
            max(run.p99_ms for run in runs),
            sum(run.non_2xx for run in runs),
        )
        total.requests = sum(run.requests for run in runs)
        return total

    def measure(self, rtts: list[float], work: Path) -> list[Row]:
        """Each scenario in ``--rounds`` rounds, each round at every round trip in turn (a
        machine whose speed drifts moves every row alike); then a lone order at each."""
        hosts = self.hosts
        rows = [Row(rtt) for rtt in rtts]
        for row in rows:
            hosts.tell(f"delay {row.rtt_ms / 2000}")
            row.measured_rtt_ms = hosts.probe_rtt_ms()
        line_pid = hosts.line.pid if hosts.line else 0
        for name in (*READS, *ORDERS):
            for round_ in range(self.args.rounds):
                for row in rows:
                    hosts.tell(f"delay {row.rtt_ms / 2000}")
                    cpu_before = cpu_seconds(line_pid)
                    if name in READS:
                        run = self.load(READS[name].format(id=self.hot))
                        row.runs.setdefault(name, []).append(run)
                    else:
                        self.order_run(name, row, work, round_)
                    row.line_cpu_s += cpu_seconds(line_pid) - cpu_before
            print(f"cluster: {name} measured", flush=True)
        for row in rows:
            hosts.tell(f"delay {row.rtt_ms / 2000}")
            row.lone_round_trips = self.lone_order_round_trips()
        return rows

    def order_run(self, name: str, row: Row, work: Path, round_: int) -> None:
        """Orders from both API hosts at once: one hot product, or spread over them all."""
        hosts, rtt_ms = self.hosts, row.rtt_ms
        products = [self.hot] if name == "orders hot" else self.ids
        customer = f"cus_cluster_{name}_{rtt_ms:g}_{round_}".replace(".", "_").replace(" ", "_")
        scripts = {
            host: order_script(work / f"{customer}-{host}.lua", products, customer)
            for host in ("api1", "api2")
        }
        hosts.tell("reset")
        run = self.load("/v1/orders", scripts)
        time.sleep(1)  # the requests in flight when wrk stopped finish
        stats = hosts.tell("stats")
        turns = stats["turns"]
        assert isinstance(turns, list)
        query = "SELECT count(*) FROM orders WHERE customer_id = '{}'"  # our own name, no input
        stored = int(hosts.sql(query.format(customer))[0][0])
        seen = run.requests - run.non_2xx
        in_flight = 2 * self.args.connections
        where = f"{rtt_ms:g} ms, {name}"
        if run.non_2xx:
            self.failures.append(f"{where}: {run.non_2xx} answers not 2xx")
        if not seen <= stored <= seen + in_flight:
            self.failures.append(f"{where}: wrk saw {seen} 2xx, {stored} orders stored")
        row.runs.setdefault(name, []).append(run)
        row.turns[name] = row.turns.get(name, 0) + turns[0] + turns[1]
        row.stored[name] = row.stored.get(name, 0) + stored

    def lone_order_round_trips(self) -> float:
        """The round trips of one order placed alone (a batch of one): the median of three
        (not its latency: on this loaded machine a lone GET waited 100-400 ms to be run)."""
        counts = []
        headers = {"Authorization": f"Bearer {self.key}"}
        for _ in range(3):
            self.hosts.tell("reset")
            response = httpx.post(
                f"{self.base_url('api1')}/v1/orders",
                json=order_body(self.hot, "cus_cluster_lone"),
                headers={**headers, "Idempotency-Key": secrets.token_hex(16)},
                timeout=30,
            )
            if response.status_code != 201:
                self.failures.append(f"a lone order answered {response.status_code}")
            time.sleep(0.2)
            turns = self.hosts.tell("stats")["turns"]
            assert isinstance(turns, list)
            counts.append(turns[0])
        return float(statistics.median(counts))

    def check(self) -> list[str]:
        """The SQL checks on the database host: stock exact, one order.created per order."""
        wrong_stock = self.hosts.sql(WRONG_STOCK)
        events = self.hosts.sql(
            "SELECT o.id, COUNT(e.id) FROM orders o LEFT JOIN events e ON e.order_id = o.id "
            "AND e.type = 'order.created' GROUP BY o.id HAVING COUNT(e.id) <> 1"
        )
        orders, units = self.hosts.sql(
            "SELECT COUNT(DISTINCT o.id), COALESCE(SUM(i.quantity), 0) FROM orders o "
            "JOIN order_items i ON i.order_id = o.id"
        )[0]
        failures = [f"stock not exact: {row}" for row in wrong_stock[:10]]
        failures += [f"order without exactly one order.created: {row}" for row in events[:10]]
        summary = (
            f"{orders} orders, {units} units: stock exact on every product "
            f"({len(wrong_stock)} wrong), {len(events)} orders without exactly one order.created"
        )
        return [summary, *failures]


def ratio(row: Row, base: Row, name: str) -> str:
    rate, base_rate = row.rate(name), base.rate(name)
    return f"{rate:,.0f}/s ({rate / base_rate:.2f}x)" if base_rate else f"{rate:,.0f}/s"


def table(rows: list[Row]) -> str:
    base = rows[0]
    lines = [
        "| RTT (measured) | reads list | reads by id | orders hot | orders spread "
        "| p99 orders hot / spread "
        "| round trips per order hot / spread (a lone order's) | delay line CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.rtt_ms:g} ms ({row.measured_rtt_ms:.2f}) | {ratio(row, base, 'list')} "
            f"| {ratio(row, base, 'by id')} | {ratio(row, base, 'orders hot')} "
            f"| {ratio(row, base, 'orders spread')} "
            f"| {row.p99_ms('orders hot'):.0f} / {row.p99_ms('orders spread'):.0f} ms "
            f"| {row.round_trips('orders hot'):.2f} / {row.round_trips('orders spread'):.2f} "
            f"({row.lone_round_trips:g}) "
            f"| {row.line_cpu_s:.1f} s |"
        )
    return "\n".join(lines)


def report(
    rows: list[Row], checks: list[str], failures: list[str], args: argparse.Namespace
) -> str:
    revision = sh("git", "-C", str(ROOT), "rev-parse", "--short", "HEAD", check=False).strip()
    load = os.getloadavg()
    status = (
        "all checks passed" if not failures else "FAILED:\n" + "\n".join(f"- {f}" for f in failures)
    )
    return f"""# make cluster

{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {revision}, {platform.machine()},
{os.cpu_count()} CPUs (load average {load[0]:.1f} when it ended: a machine shared with other
work, so absolute rates move from run to run; compare the ratios, each to the 0 ms row of the
same run).

Hosts: network namespaces on this machine (a database host with its own PostgreSQL and Redis,
two API hosts, a worker host); the load from the root namespace, wrk -c{args.connections} against
each API host at once, {args.duration} s a run, {args.rounds} round(s): the medians (each round
runs a scenario at every round trip in turn, so that the machine's drift moves each row alike).
The app <-> database round trip is added by a user-space delay line (TUN devices,
`bench/delayline.py`); "measured" is the median TCP connect time through it (the line's
wake-up adds a little to the set delay). Ratios are to the 0 ms row, which goes through the
same line. Round trips per order: the line's count of app -> database turns on the two API
hosts' PostgreSQL flows during the order runs, over the orders stored (orders are placed in
batches: a batch's round trips are shared by its orders); in brackets, those of one order
placed alone (the median of three). Delay line CPU: its CPU
seconds over the row's runs.

{table(rows)}

Correctness (SQL on the database host, after all runs): {checks[0]}.
Order runs: each stored at least the orders wrk saw answered 2xx (and at most those plus the
requests in flight when it stopped): {"yes" if not any("stored" in f for f in failures) else "no"}.

Result: {status}
"""


def main() -> int:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix=f"{args.prefix}-"))
    work.chmod(0o711)  # PostgreSQL's data directory is inside, owned by the postgres user

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    hosts = Hosts(args.prefix, work / "hosts")
    (work / "hosts").mkdir()
    print(f"cluster: namespaces {args.prefix}-*, work in {work}", flush=True)
    try:
        hosts.make()
        bench = Bench(hosts, args)
        bench.start()
        text, failures = "", []
        if not args.faults_only:
            bench.load(READS["list"], seconds=1)  # warm-up
            rows = bench.measure(args.rtt_list, work)
            checks = bench.check()
            failures = bench.failures + checks[1:]
            text = report(rows, checks, failures, args)
            print(text, flush=True)
        if args.fault_list:  # at the last round trip
            fault_text, fault_failures = run_faults(bench, args.fault_list, args.rtt_list[-1])
            text, failures = text + fault_text, failures + fault_failures
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        return 1 if failures else 0
    except KeyboardInterrupt as interrupt:
        print(f"cluster: interrupted ({str(interrupt) or 'SIGINT'}), removing it all", flush=True)
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a Ctrl-C now would leave things behind
            signal.signal(sig, signal.SIG_IGN)
        hosts.close()
        shutil.rmtree(work, ignore_errors=True)
        left = hosts.leftover_namespaces() + hosts.leftover_links()
        if left:
            print(f"cluster: could not remove {left}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
