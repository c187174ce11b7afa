"""``make cluster``'s faults (issue 32, item 4): each run while 8 clients place orders, then
checked in SQL on the database host. ``bench/cluster.py --faults a,b,c,d,e`` (the default).

The load (:class:`Load`, ``bench/cluster_load.py``): 8 clients, each placing orders of one unit
of one of a few products in turn through its API host (half on each), retrying every failure (a
connection error, a timeout, a 409 of a claim in flight, a 5xx) with the SAME Idempotency-Key
until it is answered 2xx (every third retry through the other API host), for at most
``ACK_BOUND_SECONDS``. Each order's ``customer_id`` names its key, so SQL can count the orders
of a key. Faults (injected 2 s into the load, which goes on 3 s after the fault healed):

a. api1 cut off from the database host for ``CUT_SECONDS``, silently: the delay line drops
   every packet of its link (nothing closed, nothing answers);
b. ``pg_ctl restart -m fast`` of the database host's PostgreSQL;
c. Redis cut off from both API hosts for ``CUT_SECONDS`` (the delay line drops its packets;
   the faults' processes count rate limits in Redis);
d. the worker SIGKILLed and another started at once;
e. as (a), and meanwhile, through api2, the revocation of a key that api1 had served (``keys
   revoke``) and a product's stock changed (``PATCH``): api1 must refuse the key (401, or 503
   while it cannot read) and never show the old stock to a request sent 2 s after the cut or
   later (or after the change, if that committed later).

After each: the load stopped, the service healed, the worker drained (every event's delivery
to the receiver ``succeeded`` and the receiver, ``bench/receiver.py`` on the worker host, saw
it), then in SQL: every acknowledged order stored exactly once under its key, no order of an
unacknowledged key, every product's stock its initial stock minus the units of its orders that
are not canceled, one ``order.created`` per order, each delivered. Any failure: the row says
FAILED with what was seen, and ``make cluster`` exits 1.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Protocol

import httpx
from cluster_hosts import API_PORT, APP_HOSTS, BENCH, PG_PORT, REDIS_PORT, Hosts, pg_bin, sh
from cluster_load import FAULT_ENV, Load, Outcome, report


class Bench(Protocol):
    """What the faults need of ``cluster.Bench`` (said here, so that this module does not
    import the one that runs it)."""

    hosts: Hosts
    key: str
    ids: list[str]
    apps: dict[str, subprocess.Popen[bytes]]

    def start_apps(self, extra: dict[str, str]) -> None: ...
    def app_env(self, host: str, extra: dict[str, str] | None = None) -> dict[str, str]: ...
    def spawn_app(self, host: str, extra: dict[str, str]) -> subprocess.Popen[bytes]: ...


CUT_SECONDS = 10.0
BEFORE_SECONDS = 2.0
AFTER_SECONDS = 3.0
DRAIN_SECONDS = 90.0  # a killed worker's claims lapse after 3 x the attempt timeout + 30 s
STALE_SECONDS = 2.0  # issue 32: a cut-off host stops serving cached keys and stock within 2 s
RECEIVER_PORT = 9099
INITIAL_STOCK = 10_000_000  # bench/run.py's prepare
CHANGED_STOCK = 5_000_000


def run_faults(bench: Bench, faults: list[str], rtt_ms: float) -> tuple[str, list[str]]:
    """Run ``faults`` in turn at a round trip of ``rtt_ms`` (the cluster's processes restarted
    for them first); the report (also printed) and the failures."""
    bench.hosts.tell(f"delay {rtt_ms / 2000}")
    runner = Faults(bench)
    runner.start()
    outcomes = []
    for fault in faults:
        began = time.monotonic()
        outcomes.append(runner.run(fault))
        print(f"cluster: fault ({fault}) done in {time.monotonic() - began:.0f} s", flush=True)
    text = report(outcomes, rtt_ms)
    print(text, flush=True)
    return text, [f"fault ({o.fault}): {f}" for o in outcomes for f in o.failures]


async def make_keys(url: str, account: str) -> tuple[str, str, str]:
    """An operator key, and a client key of the bench's account (to be revoked): (admin
    secret, the client key's id, its secret)."""
    from commerce_api.accounts import service as accounts
    from commerce_api.storage.db import Database

    db = Database(url)
    try:
        async with db.write() as conn:
            admin = await accounts.create_key(conn, "sandbox", account_id=None, role="admin")
            victim = await accounts.create_key(conn, "sandbox", account_id=account)
    finally:
        await db.dispose()
    return admin.secret, victim.id, victim.secret


class Faults:
    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.hosts = bench.hosts
        self.stock = dict.fromkeys(bench.ids, INITIAL_STOCK)  # each product's initial stock
        self.products = bench.ids[1:5]
        self.changed = bench.ids[-1]  # the product whose stock (e) changes, not ordered
        self.endpoint = ""
        self.ids_file = self.hosts.work / "receiver-ids"
        self.admin = self.victim_id = self.victim = ""

    def url(self, host: str) -> str:
        return f"http://{self.hosts.root_link(host)}:{API_PORT}"

    def start(self) -> None:
        """The faults' processes, the receiver on the worker host, its endpoint, the keys."""
        hosts, bench = self.hosts, self.bench
        bench.start_apps(FAULT_ENV)
        receiver = [sys.executable, str(BENCH / "receiver.py"), str(RECEIVER_PORT)]
        hosts.spawn("worker", [*receiver, str(self.ids_file)], "receiver.log")
        account = hosts.sql("SELECT account_id FROM api_keys WHERE account_id IS NOT NULL")[0][0]
        admin_url = f"postgresql://postgres@{hosts.root_link('db')}:{PG_PORT}/postgres"
        self.admin, self.victim_id, self.victim = asyncio.run(make_keys(admin_url, account))
        endpoint = {"url": f"http://127.0.0.1:{RECEIVER_PORT}/hook", "events": ["order.created"]}
        response = httpx.post(
            f"{self.url('api2')}/v1/webhook_endpoints",
            json=endpoint,
            headers={"Authorization": f"Bearer {bench.key}"},
            timeout=30,
        )
        response.raise_for_status()
        self.endpoint = response.json()["id"]

    def run(self, fault: str) -> Outcome:
        outcome = Outcome(fault)
        urls = {host: self.url(host) for host in ("api1", "api2")}
        load = Load(urls, self.bench.key, self.products, f"cusf-{fault}-{time.time_ns() % 10**8}-")
        load.start()
        time.sleep(BEFORE_SECONDS)
        healed = self.cut_with_changes(outcome) if fault == "e" else self.inject(fault, outcome)
        time.sleep(AFTER_SECONDS)
        load.stop()
        outcome.acked, outcome.unacked = len(load.acks), len(load.unacked)
        outcome.failures += load.failures[:5]
        if load.unacked:
            outcome.failures.append(
                f"{len(load.unacked)} orders never acknowledged, e.g. {load.unacked[:3]}"
            )
        if load.acks:
            outcome.longest_wait_s = max(ack.acked_at - ack.first_try for ack in load.acks)
        outcome.recovery_s = load.recovery(healed)
        outcome.unserved_s = load.unserved(load.started)
        self.check(outcome, load)
        return outcome

    def inject(self, fault: str, outcome: Outcome) -> float:
        """Make the fault, heal it; when it healed (``time.monotonic()``)."""
        hosts = self.hosts
        if fault == "a":
            link = APP_HOSTS.index("api1")
            hosts.tell(f"cut {link} 0")
            time.sleep(CUT_SECONDS)
            hosts.tell(f"heal {link} 0")
        elif fault == "b":
            as_postgres = ["runuser", "-u", "postgres", "--"]
            pg_ctl = [*as_postgres, str(pg_bin() / "pg_ctl"), "-D", str(hosts.work / "pg")]
            restart = [*pg_ctl, "-l", str(hosts.work / "pg.log"), "-m", "fast", "-w", "restart"]
            sh(*hosts.exec("db", restart))
        elif fault == "c":
            before = self.store_errors()
            for host in ("api1", "api2"):
                hosts.tell(f"cut {APP_HOSTS.index(host)} {REDIS_PORT}")
            time.sleep(CUT_SECONDS)
            for host in ("api1", "api2"):
                hosts.tell(f"heal {APP_HOSTS.index(host)} {REDIS_PORT}")
            errors = self.store_errors() - before
            outcome.notes.append(f"requests counted in-process, Redis unreachable: {errors}")
            if not errors:  # the cut did not reach Redis's traffic: nothing was tested
                outcome.failures.append("no rate-limit store error during the cut of Redis")
        elif fault == "d":
            hosts.stop(self.bench.apps["worker"], signal.SIGKILL)
            self.bench.apps["worker"] = self.bench.spawn_app("worker", FAULT_ENV)
        return time.monotonic()

    def store_errors(self) -> int:
        """The API hosts' ``commerce_rate_limit_store_errors_total``, summed (``/metrics``)."""
        total = 0.0
        for host in ("api1", "api2"):
            text = httpx.get(self.url(host) + "/metrics", timeout=10).text
            for line in text.splitlines():
                if line.startswith("commerce_rate_limit_store_errors_total"):
                    total += float(line.split()[-1])
        return int(total)

    def cut_with_changes(self, outcome: Outcome) -> float:
        """(e): api1 cut off; through api2 a key api1 served is revoked and a product's stock
        changed; api1 polled with both meanwhile."""
        hosts, link = self.hosts, APP_HOSTS.index("api1")
        victim = {"Authorization": f"Bearer {self.victim}"}
        shopper = {"Authorization": f"Bearer {self.bench.key}"}
        product = f"/v1/products/{self.changed}"
        for headers in (victim, shopper):  # both in api1's caches before the cut
            httpx.get(self.url("api1") + product, headers=headers, timeout=10).raise_for_status()
        old = self.stock[self.changed]
        seen: list[tuple[float, str, int | str, object]] = []
        stop = threading.Event()

        def poll() -> None:
            with httpx.Client(timeout=1) as http:
                while not stop.is_set():
                    for who, headers in (("revoked key", victim), ("stock", shopper)):
                        sent = time.monotonic() - cut
                        try:
                            response = http.get(self.url("api1") + product, headers=headers)
                        except httpx.HTTPError as exc:
                            seen.append((sent, who, type(exc).__name__, None))
                            continue
                        stock = (
                            response.json().get("inventory_count") if response.is_success else None
                        )
                        seen.append((sent, who, response.status_code, stock))
                    time.sleep(0.1)

        # `commerce-api keys revoke` on api2, its imports, connection and migration check
        # done before the cut (seconds on a busy machine): it revokes when told to.
        revoker = subprocess.Popen(  # noqa: S603
            hosts.exec("api2", [sys.executable, str(BENCH / "cluster_revoke.py"), self.victim_id]),
            env=self.bench.app_env("api2"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert revoker.stdout is not None
        if revoker.stdout.readline().strip() != "ready":
            raise RuntimeError("the revoking process on api2 did not start")
        hosts.tell(f"cut {link} 0")
        cut = time.monotonic()
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        said, _ = revoker.communicate("go\n", timeout=60)
        if revoker.returncode != 0:
            raise RuntimeError(f"the revocation on api2 failed: {said.strip()}")
        revoked = time.monotonic() - cut
        httpx.patch(
            self.url("api2") + product,
            json={"inventory_count": CHANGED_STOCK},
            headers={"Authorization": f"Bearer {self.admin}"},
            timeout=30,
        ).raise_for_status()
        changed = time.monotonic() - cut
        # Its initial stock, as the checks count: the stock set plus the units ordered before
        # (the measurements' orders spread over every product; the load orders none of it).
        ordered = self.hosts.sql(
            "SELECT COALESCE(SUM(i.quantity), 0) FROM order_items i JOIN orders o ON o.id = "  # noqa: S608
            f"i.order_id WHERE o.status <> 'canceled' AND i.product_id = '{self.changed}'"
        )
        self.stock[self.changed] = CHANGED_STOCK + int(ordered[0][0])
        time.sleep(max(0.0, CUT_SECONDS - (time.monotonic() - cut)))
        stop.set()
        poller.join()
        hosts.tell(f"heal {link} 0")
        healed = time.monotonic()
        served = [
            s
            for s in seen
            if s[1] == "revoked key"
            and s[0] >= max(STALE_SECONDS, revoked)
            and isinstance(s[2], int)
            and 200 <= s[2] < 300
        ]
        stale = [
            s
            for s in seen
            if s[1] == "stock" and s[0] >= max(STALE_SECONDS, changed) and s[3] == old
        ]
        answers = Counter(
            str(s[2]) for s in seen if s[1] == "revoked key" and s[0] >= STALE_SECONDS
        )
        stocks = Counter(
            f"{s[2]} {s[3]}" for s in seen if s[1] == "stock" and s[0] >= STALE_SECONDS
        )
        outcome.notes.append(
            f"key revoked through api2 at +{revoked:.1f} s after the cut, stock changed at "
            f"+{changed:.1f} s, link healed at +{healed - cut:.1f} s; from "
            f"+{STALE_SECONDS:g} s api1 answered the revoked key {dict(answers)}, the product "
            f"(status stock) {dict(stocks)}"
        )
        if served:
            outcome.failures.append(
                f"api1 (cut off) answered 2xx to the revoked key {len(served)} times from "
                f"+{served[0][0]:.1f} s to +{served[-1][0]:.1f} s after the cut (revoked at "
                f"+{revoked:.1f} s through api2); its answers from +{STALE_SECONDS:g} s: "
                f"{dict(answers)}"
            )
        if stale:
            outcome.failures.append(
                f"api1 (cut off) showed the old stock ({old}) {len(stale)} times from "
                f"+{stale[0][0]:.1f} s to +{stale[-1][0]:.1f} s after the cut (changed to "
                f"{CHANGED_STOCK} at +{changed:.1f} s through api2)"
            )
        return healed

    def drained(self, tag: str) -> tuple[list[list[str]], set[str]]:
        """Wait (at most ``DRAIN_SECONDS``) until every event of the run's orders was delivered
        and the receiver saw it; the events with their delivery status, the ids seen."""
        deadline = time.monotonic() + DRAIN_SECONDS
        while True:
            rows = self.hosts.sql(  # the tag and the endpoint's id are ours: no input
                "SELECT e.id, COALESCE(d.status, 'none') FROM events e JOIN orders o ON "  # noqa: S608
                f"o.id = e.order_id LEFT JOIN webhook_deliveries d ON d.event_id = e.id AND "
                f"d.endpoint_id = '{self.endpoint}' WHERE e.type = 'order.created' "
                f"AND o.customer_id LIKE '{tag}%'"
            )
            seen = set(self.ids_file.read_text().split()) if self.ids_file.exists() else set()
            done = all(status == "succeeded" and event in seen for event, status in rows)
            if done or time.monotonic() > deadline:
                return rows, seen
            time.sleep(0.5)

    def check(self, outcome: Outcome, load: Load) -> None:
        """The SQL checks of one run (its orders: ``customer_id`` starts with its tag)."""
        tag = load.tag
        events, seen = self.drained(tag)
        outcome.events = len(events)
        outcome.delivered = sum(
            1 for event, status in events if status == "succeeded" and event in seen
        )
        if outcome.delivered != outcome.events:
            missing = [row for row in events if row[1] != "succeeded" or row[0] not in seen]
            outcome.failures.append(
                f"{outcome.events - outcome.delivered} events not delivered within "
                f"{DRAIN_SECONDS:g} s (id, status): {missing[:3]}"
            )
        stored = {
            customer: (int(count), order)
            for customer, count, order in self.hosts.sql(
                "SELECT customer_id, COUNT(*), MIN(id) FROM orders "  # noqa: S608
                f"WHERE customer_id LIKE '{tag}%' GROUP BY customer_id"
            )
        }
        acked = {ack.customer: ack.order_id for ack in load.acks}
        for customer, (count, order) in stored.items():
            if count > 1:
                outcome.duplicated += 1
                outcome.failures.append(f"{count} orders stored for key of {customer}")
            elif customer in acked and acked[customer] != order:
                outcome.wrong_ack += 1
                outcome.failures.append(
                    f"{customer}: acknowledged {acked[customer]}, stored {order}"
                )
            elif customer not in acked and customer not in load.unacked:
                outcome.stray += 1
                outcome.failures.append(f"{customer}: stored, never acknowledged nor in flight")
        lost = [customer for customer in acked if customer not in stored]
        if lost:
            outcome.wrong_ack += len(lost)
            outcome.failures.append(f"{len(lost)} acknowledged orders not stored: {lost[:3]}")
        units = {
            product: int(total)
            for product, total in self.hosts.sql(
                "SELECT i.product_id, SUM(i.quantity) FROM order_items i JOIN orders o "
                "ON o.id = i.order_id WHERE o.status <> 'canceled' GROUP BY i.product_id"
            )
        }
        for product, stock in self.hosts.sql("SELECT id, inventory_count FROM products"):
            expected = self.stock.get(product, INITIAL_STOCK) - units.get(product, 0)
            if int(stock) != expected:
                outcome.wrong_stock += 1
                outcome.failures.append(f"stock of {product}: {stock}, expected {expected}")
        wrong = self.hosts.sql(
            "SELECT o.id, COUNT(e.id) FROM orders o LEFT JOIN events e ON e.order_id = o.id "  # noqa: S608
            f"AND e.type = 'order.created' WHERE o.customer_id LIKE '{tag}%' "
            "GROUP BY o.id HAVING COUNT(e.id) <> 1"
        )
        outcome.wrong_events = len(wrong)
        if wrong:
            outcome.failures.append(f"orders without exactly one order.created: {wrong[:3]}")
