"""Prometheus metrics, served at ``/metrics`` in the text exposition format.

The counters and histograms live in this module (one set per process). With ``serve --workers
N`` each worker writes them to files in ``PROMETHEUS_MULTIPROC_DIR`` (``serve`` sets it to a
fresh directory) and whichever worker answers the scrape adds them all up, so the numbers are
the deployment's and not one worker's.

The outbox gauges are read from the database at scrape time (one indexed query, the webhooks'
repository's: the app hands it over with :func:`read_outbox_with`), so they are the same
whichever process answers: aggregate them across instances with ``max``, not ``sum``.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    REGISTRY,
    CollectorRegistry,
    Counter,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.core.timestamps import utcnow
from commerce_api.observability import MULTIPROC_DIR_VARIABLE, AnsweredRequest
from commerce_api.observability.batching import Batch
from commerce_api.observability.histogram import BatchedChild, BatchedHistogram
from commerce_api.storage.db import Database
from commerce_api.storage.faults import log_failure

logger = logging.getLogger("commerce_api.metrics")

METRICS_PATH = "/metrics"
# What generate_latest() writes (the classic format every Prometheus version reads).
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
# The label of a request that matched no route: raw paths would make the label set unbounded.
UNMATCHED_ROUTE = "unmatched"
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUESTS = Counter(
    "commerce_http_requests",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
)
REQUEST_DURATION = BatchedHistogram(
    "commerce_http_request_duration_seconds",
    "Time from receiving a request to sending the end of its response.",
    ["route", "method"],
    buckets=LATENCY_BUCKETS,
)
RATE_LIMIT_REJECTIONS = Counter(
    "commerce_rate_limit_rejections",
    "Requests refused with 429, by who was counted: an API key's account or a client IP.",
    ["caller"],
)
RATE_LIMIT_STORE_ERRORS = Counter(
    "commerce_rate_limit_store_errors",
    "Requests counted in this process because the shared rate-limit store (Redis) failed.",
)
STORAGE_FULL_ERRORS = Counter(
    "commerce_storage_full_errors",
    "Requests answered 503 because the database's disk (or PostgreSQL's) was full.",
)
HTTP_REFUSALS = Counter(
    "commerce_http_refusals",
    "Requests refused at the edge of the app, by reason: server_busy (503), request_timeout "
    "(408), payload_too_large (413), header_too_large (431).",
    ["reason"],
)
WEBHOOK_DELIVERIES = Counter(
    "commerce_webhook_delivery_attempts",
    "Webhook delivery attempts by outcome: succeeded, retry (scheduled again) or failed (final).",
    ["outcome"],
)

# Children created up front, so the hot paths only look them up.
REJECTED_KEY = RATE_LIMIT_REJECTIONS.labels("key")
REJECTED_IP = RATE_LIMIT_REJECTIONS.labels("ip")
DELIVERY_OUTCOMES = {
    outcome: WEBHOOK_DELIVERIES.labels(outcome) for outcome in ("succeeded", "retry", "failed")
}


class RequestMetrics:
    """The request metrics, fed in batches.

    The request observer (``http.pipeline.RequestObserver``) notes each answered request in
    the batch it shares with the request log and hands the batch here (:meth:`record_many`)
    every ``RequestObserver.BATCH_SIZE`` requests, ``RequestObserver.FLUSH_SECONDS`` after the
    first note, and before every scrape (:func:`flush_before_scrape`) — so a scrape always sees
    this process's requests, and another worker's (``--workers``) at most ``FLUSH_SECONDS``
    late. Batching keeps prometheus-client's locks and bucket search out of each request's
    path: one increment per label set, bucket and batch (``histogram.BatchedHistogram``).
    """

    def __init__(self) -> None:
        # (route, method, status) → its counter and its (route, method) histogram
        self._children: dict[tuple[str, str, int], tuple[Counter, BatchedChild]] = {}

    def record_many(self, answered: list[AnsweredRequest]) -> None:
        # Counted per child, then added once: in multi-process mode every increment is a locked
        # write to a shared file, and a batch holds few distinct children.
        counts: dict[tuple[str, str, int], list[float]] = {}
        for answer in answered:
            labels = answer[:3]  # route, method, status
            durations = counts.get(labels)
            if durations is None:
                counts[labels] = [answer[3]]
            else:
                durations.append(answer[3])
        for (route, method, status), durations in counts.items():
            children = self._children.get((route, method, status))
            if children is None:
                label = counter_method(method)
                children = (
                    REQUESTS.labels(route, label, str(status)),
                    REQUEST_DURATION.labels(route, label),
                )
                self._children[route, method, status] = children
            counter, histogram = children
            counter.inc(len(durations))
            histogram.observe_many(durations)


# The batches holding requests not yet handed to the metrics (the request observers').
_UNCOUNTED: weakref.WeakSet[Batch[AnsweredRequest]] = weakref.WeakSet()


def flush_before_scrape(batch: Batch[AnsweredRequest]) -> None:
    """Have every scrape flush ``batch`` (one whose writer feeds :meth:`RequestMetrics.record_many`)
    before it reads the metrics: a scrape counts every request answered before it."""
    _UNCOUNTED.add(batch)


def counter_method(method: str) -> str:
    """The method's label: an arbitrary method must not create a label value."""
    return method if method in KNOWN_METHODS else "other"


def deliveries_outcome(delivery_status: str) -> str:
    """The metric's outcome for a delivery's status after an attempt."""
    return "retry" if delivery_status == "pending" else delivery_status


@dataclass(frozen=True, slots=True)
class OutboxStats:
    pending: int
    oldest_due_seconds: float


# The outbox's pending deliveries and the earliest time one of them is due (None: none is).
OutboxReader = Callable[[AsyncConnection], Awaitable[tuple[int, datetime | None]]]
_outbox: list[OutboxReader] = []  # the reader the app handed over, if any


def read_outbox_with(reader: OutboxReader) -> None:
    """Have every scrape read the outbox gauges with ``reader`` (the webhooks' repository's
    query: that layer is above this one). Without one, a scrape has no outbox gauges."""
    _outbox[:] = [reader]


async def outbox_stats(db: Database) -> OutboxStats | None:
    """Pending deliveries and how long the most overdue one has waited (0 when none is due);
    None when no reader was handed over."""
    if not _outbox:
        return None
    async with db.read() as conn:
        pending, oldest = await _outbox[0](conn)
    age = 0.0 if oldest is None else max(0.0, (utcnow() - oldest).total_seconds())
    return OutboxStats(pending, age)


class _Scrape:
    """One scrape: the process's (or every worker's) metrics plus the outbox gauges."""

    def __init__(self, source: Collector, outbox: OutboxStats | None) -> None:
        self.source = source
        self.outbox = outbox

    def collect(self) -> Iterator[Metric]:
        yield from REQUEST_DURATION.expose(self.source.collect())
        if self.outbox is None:
            return
        yield GaugeMetricFamily(
            "commerce_webhook_outbox_pending",
            "Webhook deliveries waiting to be attempted (due now or scheduled for a retry).",
            value=self.outbox.pending,
        )
        yield GaugeMetricFamily(
            "commerce_webhook_outbox_oldest_due_age_seconds",
            "How long the longest-waiting due delivery has been due; 0 when none is due.",
            value=self.outbox.oldest_due_seconds,
        )


def _source() -> Collector:
    if os.environ.get(MULTIPROC_DIR_VARIABLE):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


async def render(db: Database) -> bytes:
    """The exposition text for one scrape."""
    try:
        outbox = await outbox_stats(db)
    except Exception as exc:
        # The rest of the metrics are most wanted exactly when the database is in trouble.
        log_failure(logger, exc, "could not read the webhook outbox for /metrics")
        outbox = None
    for batch in list(_UNCOUNTED):
        batch.flush()  # this process's latest requests, before they are read
    return generate_latest(_Scrape(_source(), outbox))


def process_exited() -> None:
    """Tell the multiprocess files this worker is gone (drops its live gauges, if any)."""
    directory = os.environ.get(MULTIPROC_DIR_VARIABLE)
    if directory:
        mark_process_dead(os.getpid(), directory)  # type: ignore[no-untyped-call]
