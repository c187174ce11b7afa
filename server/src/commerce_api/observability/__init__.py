"""Metrics and logs for operators.

May import: ``core``, ``settings`` and ``storage``. (``http.observer`` reports answered
requests here.)
"""

# Where prometheus-client's multiprocess mode keeps each worker's metrics. Read when
# prometheus-client is first imported, so `serve` sets it before anything imports that.
MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
