"""Metrics, logs and traces (``traces``: the OTEL_* variables) for operators.

May import: ``core``, ``settings`` and ``storage``. (The request pipeline's observer,
``http.pipeline.RequestObserver``, hands answered requests here in batches.)
"""

# Where prometheus-client's multiprocess mode keeps each worker's metrics. Read when
# prometheus-client is first imported, so `serve` sets it before anything imports that.
MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

# One answered request, as the request metrics and the request log receive it: its route
# template, method, status and duration in seconds (for both), then the time it was answered,
# its request id, account id and key id (for the log; the time is None when the log was off).
AnsweredRequest = tuple[str, str, int, float, float | None, str | None, str | None, str | None]
