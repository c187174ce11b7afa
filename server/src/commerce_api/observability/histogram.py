"""A histogram fed many values at a time, with prometheus-client's documented calls only.

prometheus-client's ``Histogram.observe`` counts one value a call, and in multi-process mode
(``serve --workers``) each call is two locked writes to a shared file (~10 µs); it has no call
for many values. So the request durations are kept as two counters, whose documented ``inc``
takes any amount — one per bucket with the bucket's count in the batch (labelled ``le``, not
cumulative), one with the batch's sum — and the scrape turns them back into the histogram
(:meth:`BatchedHistogram.expose`): the same ``_bucket``/``_count``/``_sum`` samples
``Histogram`` writes (not its ``_created``), added up across workers as counters are.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import REGISTRY, CollectorRegistry, Counter
from prometheus_client.core import HistogramMetricFamily, Metric


def _le(bound: float) -> str:
    """A bucket's ``le`` label, as prometheus-client writes it."""
    return "+Inf" if bound == math.inf else repr(float(bound))


class BatchedHistogram:
    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        self.bounds = [*(float(b) for b in buckets), math.inf]
        self.les = [_le(bound) for bound in self.bounds]
        # Internal families, read back by ``expose`` (never exposed as such).
        self.counts_name, self.sums_name = f"{name}_bucket_counts", f"{name}_sums"
        self.counts = Counter(
            self.counts_name, f"{name}: values per bucket", [*labelnames, "le"], registry=registry
        )
        self.sums = Counter(
            self.sums_name, f"{name}: the sum of the values", labelnames, registry=registry
        )

    def labels(self, *values: str) -> BatchedChild:
        return BatchedChild(self, values)

    def expose(self, families: Iterable[Metric]) -> Iterator[Metric]:
        """``families`` (a registry's collection) with the internal counters replaced by the
        histogram they count."""
        counts_name, sums_name = self.counts_name, self.sums_name
        per_bucket: dict[tuple[str, ...], dict[str, float]] = {}
        sums: dict[tuple[str, ...], float] = {}
        others: list[Metric] = []
        position = None
        for family in families:
            if family.name not in (counts_name, sums_name):
                others.append(family)
                continue
            position = len(others) if position is None else position
            for sample in family.samples:
                if not sample.name.endswith("_total"):
                    continue  # _created
                labels = tuple(sample.labels[name] for name in self.labelnames)
                if family.name == sums_name:
                    sums[labels] = sums.get(labels, 0.0) + sample.value
                else:
                    found = per_bucket.setdefault(labels, {})
                    le = sample.labels["le"]
                    found[le] = found.get(le, 0.0) + sample.value
        histogram = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, counted in per_bucket.items():
            cumulative, buckets = 0.0, []
            for le in self.les:
                cumulative += counted.get(le, 0.0)
                buckets.append((le, cumulative))
            histogram.add_metric(list(labels), buckets, sums.get(labels, 0.0))
        if position is not None:
            others.insert(position, histogram)
        yield from others


class BatchedChild:
    """One label set's buckets and sum."""

    def __init__(self, parent: BatchedHistogram, labels: Sequence[str]) -> None:
        self._bounds = parent.bounds
        self._les = parent.les
        self._counts = parent.counts
        self._labels = tuple(labels)
        self._buckets: dict[int, Counter] = {}  # made on first use: a bucket no value fell in
        self._sum = parent.sums.labels(*labels)

    def observe_many(self, values: Iterable[float]) -> None:
        """Count ``values`` (never negative: the sum is a counter, which only grows): one
        increment per bucket they fall in, one of the sum."""
        bounds = self._bounds
        per_bucket = [0] * len(bounds)
        total = 0.0
        for value in values:
            per_bucket[bisect_left(bounds, value)] += 1  # the first bound >= value, as observe
            total += value  # in order, as observe adds them
        for index, count in enumerate(per_bucket):
            if not count:
                continue
            bucket = self._buckets.get(index)
            if bucket is None:
                bucket = self._buckets[index] = self._counts.labels(*self._labels, self._les[index])
            bucket.inc(count)
        self._sum.inc(total)
