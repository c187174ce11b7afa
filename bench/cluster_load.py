"""The load of ``bench/cluster_faults.py``: ``CLIENTS`` clients placing orders, each retrying
every failure with the same Idempotency-Key until it is answered 2xx (or ``ACK_BOUND_SECONDS``
passed), recording each acknowledged order with its key.

Client ``i`` places its orders through API host ``i % 2``; every third retry of an order goes
through the other one (a client behind a balancer). A retry follows a connection error, a
timeout, a 409 (the key's claim held by an attempt in flight), a 429 or a 5xx; any other answer
is a failure. An order's ``customer_id`` is ``<tag><client>x<n>`` and its Idempotency-Key the
same, so the database tells which key each stored order came from.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx
from run import order_body

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
        self.threads = [
            threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(CLIENTS)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        """Stop placing new orders; wait for each client's last one to be acknowledged."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(ACK_BOUND_SECONDS + 2 * REQUEST_TIMEOUT_SECONDS)

    def recovery(self, healed: float) -> float | None:
        """How long after ``healed`` every client had an order acknowledged (None: one had
        none after it)."""
        firsts = []
        for client in range(CLIENTS):
            after = [a.acked_at for a in self.acks if a.client == client and a.acked_at >= healed]
            if not after:
                return None
            firsts.append(min(after) - healed)
        return max(firsts)

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
            host = self.hosts[(home + (tries % 3 == 2)) % len(self.hosts)]
            tries += 1
            try:
                response = http.post(f"{host}/v1/orders", json=body, headers=headers)
            except httpx.HTTPError:
                response = None
            if response is not None and response.is_success:
                ack = Ack(customer, response.json()["id"], i, first_try, time.monotonic())
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
