"""The load of ``bench/cluster_faults.py`` and its table: ``CLIENTS`` clients placing orders,
each retrying every failure with the same Idempotency-Key until it is answered 2xx (or
``ACK_BOUND_SECONDS`` passed), recording each acknowledged order with its key; a fault's
:class:`Outcome` (a row of the table).

Client ``i`` places its orders through API host ``i % 2``; every third retry of an order goes
through the other one (a client behind a balancer). A retry follows a connection error, a
timeout, a 409 (the key's claim held by an attempt in flight), a 429 or a 5xx; any other answer
is a failure. An order's ``customer_id`` is ``<tag><client>x<n>`` and its Idempotency-Key the
same, so the database tells which key each stored order came from.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx
from run import order_body

FAULTS = {
    "a": "api1 cut off from the database 10 s",
    "b": "pg_ctl restart -m fast",
    "c": "Redis cut off from the API hosts 10 s",
    "d": "worker SIGKILLed, another started",
    "e": "during (a): key revoked, stock changed on api2",
}
# The faults' processes: rate limits counted in Redis (limits no load reaches), receivers on
# the worker host's loopback allowed, attempts bounded at 2 s (a killed worker's claims lapse
# after 36 s).
FAULT_ENV = {
    "COMMERCE_RATE_LIMIT_ENABLED": "true",
    "COMMERCE_RATE_LIMIT_PRODUCTION": "1000000000",
    "COMMERCE_RATE_LIMIT_DEVELOPMENT": "1000000000",
    "COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS": "true",
    "COMMERCE_WEBHOOK_TIMEOUT_SECONDS": "2",
}
CLIENTS = 8
ACK_BOUND_SECONDS = 60.0
RETRY_PAUSE_SECONDS = 0.2
REQUEST_TIMEOUT_SECONDS = 6.0
RETRIED = (409, 429)  # and every 5xx


@dataclass
class Ack:
    customer: str  # also the Idempotency-Key
    order_id: str
    client: int
    host: int  # the API host that answered it: 0 (api1) or 1 (api2)
    first_try: float  # time.monotonic()
    acked_at: float


class Load:
    def __init__(self, urls: dict[str, str], key: str, products: list[str], tag: str) -> None:
        self.hosts = list(urls.values())
        self.key = key
        self.products = products
        self.tag = tag
        self.acks: list[Ack] = []
        self.unacked: list[str] = []
        self.failures: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.started = 0.0
        self.threads = [
            threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(CLIENTS)
        ]

    def start(self) -> None:
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        """Stop placing new orders; wait for each client's last one to be acknowledged."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(ACK_BOUND_SECONDS + 2 * REQUEST_TIMEOUT_SECONDS)

    def recovery(self, healed: float) -> float | None:
        """How long after ``healed`` both API hosts had acknowledged an order (None: one
        acknowledged none after it)."""
        firsts = []
        for host in range(len(self.hosts)):
            after = [a.acked_at for a in self.acks if a.host == host and a.acked_at >= healed]
            if not after:
                return None
            firsts.append(min(after) - healed)
        return max(firsts)

    def unserved(self, started: float) -> float:
        """The longest time an API host acknowledged no order (from ``started``, the load's
        start, to the last acknowledgement)."""
        longest = 0.0
        for host in range(len(self.hosts)):
            times = sorted(a.acked_at for a in self.acks if a.host == host)
            gaps = [b - a for a, b in zip([started, *times], times, strict=False)]
            longest = max([longest, *gaps])
        return longest

    def client(self, i: int) -> None:
        home = i % len(self.hosts)
        with httpx.Client(timeout=REQUEST_TIMEOUT_SECONDS) as http:
            n = 0
            while not self.stopping.is_set():
                customer = f"{self.tag}{i}x{n}"
                product = self.products[(i + n) % len(self.products)]
                self.place(http, i, home, customer, product)
                n += 1

    def place(self, http: httpx.Client, i: int, home: int, customer: str, product: str) -> None:
        """One order, retried with its key until acknowledged (or the bound)."""
        headers = {"Authorization": f"Bearer {self.key}", "Idempotency-Key": customer}
        body = order_body(product, customer)
        first_try = time.monotonic()
        tries = 0
        while True:
            host = (home + (tries % 3 == 2)) % len(self.hosts)
            tries += 1
            try:
                response = http.post(f"{self.hosts[host]}/v1/orders", json=body, headers=headers)
            except httpx.HTTPError:
                response = None
            if response is not None and response.is_success:
                ack = Ack(customer, response.json()["id"], i, host, first_try, time.monotonic())
                with self.lock:
                    self.acks.append(ack)
                return
            if (
                response is not None
                and response.status_code < 500
                and response.status_code not in RETRIED
            ):
                with self.lock:
                    self.failures.append(
                        f"{customer}: {response.status_code} {response.text[:200]}"
                    )
                    self.unacked.append(customer)
                return
            if time.monotonic() - first_try > ACK_BOUND_SECONDS:
                with self.lock:
                    self.unacked.append(customer)
                return
            time.sleep(RETRY_PAUSE_SECONDS)


@dataclass
class Outcome:
    """One fault's row."""

    fault: str
    acked: int = 0
    unacked: int = 0
    duplicated: int = 0
    stray: int = 0  # orders stored under a key never acknowledged (nor in flight at a bound)
    wrong_ack: int = 0
    wrong_stock: int = 0
    wrong_events: int = 0
    events: int = 0
    delivered: int = 0
    longest_wait_s: float = 0.0
    unserved_s: float = 0.0
    recovery_s: float | None = None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def cells(self) -> list[str]:
        exactly = self.duplicated + self.stray + self.wrong_ack
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.1f} s"
        return [
            f"({self.fault}) {FAULTS[self.fault]}",
            f"{self.acked}" + (f" ({self.unacked} never)" if self.unacked else ""),
            "yes" if not exactly else f"NO ({exactly})",
            "exact" if not self.wrong_stock else f"NO ({self.wrong_stock} wrong)",
            "1 each" if not self.wrong_events else f"NO ({self.wrong_events} wrong)",
            f"{self.delivered}/{self.events}",
            f"{self.longest_wait_s:.1f} s / {self.unserved_s:.1f} s / {recovery}",
            "ok" if not self.failures else "FAILED",
        ]


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| fault | orders acked | exactly once | stock | order.created | delivered "
        "| longest wait for an ack / a host without one / recovery | ok |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(outcome.cells()) + " |" for outcome in outcomes]
    notes = [f"- ({o.fault}) {line}" for o in outcomes for line in o.notes + o.failures]
    return "\n".join(lines + (["", *notes] if notes else []))


def report(outcomes: list[Outcome], rtt_ms: float) -> str:
    ok = all(not outcome.failures for outcome in outcomes)
    return f"""
## Faults

Under 8 clients placing orders and retrying with the same Idempotency-Key (app <-> database
round trip {rtt_ms:g} ms; `bench/cluster_faults.py` says what each fault does and what is
checked). Longest wait for an ack: from an order's first try (a client's) to its 2xx; a host
without one: the longest time an API host acknowledged no order; recovery: from the fault's
healing until both API hosts had acknowledged an order.

{table(outcomes)}

Faults: {"all checks passed" if ok else "FAILED"}
"""
