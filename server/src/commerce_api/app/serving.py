"""How ``commerce-api serve`` runs the app: granian's options, the app each worker serves
(``served_app``, granian's factory target, and ``guarded``: what ``serve`` puts around the
app), and the directory the workers share their metrics through.

``cli.serve`` imports this module before it has set ``PROMETHEUS_MULTIPROC_DIR``, and granian
forks the workers from that process: so the app (and with it prometheus-client, which reads
that variable when first imported) is imported inside the functions that need it, in the
workers, never when this module is.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp

from commerce_api.core.processes import die_with_parent
from commerce_api.observability import MULTIPROC_DIR_VARIABLE
from commerce_api.observability.logging import logging_config
from commerce_api.settings import Settings

# On SIGTERM, a worker's requests in flight and then its lifespan shutdown (the dispatcher's
# dispatcher.STOP_GRACE_SECONDS included) get this long in all; then it is killed, so the
# process is gone within about 15 s.
GRACEFUL_SHUTDOWN_SECONDS = 14
# I/O threads per worker (see granian_options).
RUNTIME_THREADS = 1
# granian's bounds for its HTTP/1 settings.
_MAX_HEADER_READ_TIMEOUT_MS = 60_000
_MIN_HTTP1_BUFFER_BYTES = 8192


def granian_options(settings: Settings, host: str, port: int, workers: int) -> dict[str, Any]:
    """The options ``serve`` gives granian's server: all of them documented ones (its README
    and ``granian --help``), derived from the ``COMMERCE_HTTP_*`` settings (see
    docs/deployment.md)."""
    from granian.constants import HTTPModes, Interfaces, RuntimeModes
    from granian.http import HTTP1Settings
    from granian.log import LogLevels

    # One timer for a head that is slow to come, whether the connection is new, idle between
    # requests or trickling one: it honours both settings as upper bounds.
    head_seconds = settings.http_header_timeout_seconds
    if settings.http_keep_alive_seconds:
        head_seconds = min(head_seconds, settings.http_keep_alive_seconds)
    http1 = HTTP1Settings(
        header_read_timeout=max(1, min(_MAX_HEADER_READ_TIMEOUT_MS, round(head_seconds * 1000))),
        keep_alive=settings.http_keep_alive_seconds > 0,
        # granian's read buffer, which a head must fit: a head past our cap up to twice it is
        # answered 431 by app/server_guard.py (in the error envelope), a larger one by the
        # server itself, which never buffers more than this for it.
        max_buffer_size=max(_MIN_HTTP1_BUFFER_BYTES, 2 * settings.http_max_header_bytes),
    )
    return {
        "address": host,
        "port": port,
        # granian's ASGI interface, the app's lifespan run in every worker (granian's own RSGI
        # interface measured no faster for this app: docs/decisions.md, "The server interface").
        "interface": Interfaces.ASGI,
        "factory": True,
        "workers": workers,
        # HTTP/1.1 only: what nginx speaks to its upstreams, and what the limits above cover.
        "http": HTTPModes.http1,
        # Each worker's I/O on granian's default runtime: one thread. Two single-threaded
        # runtimes measured ~12 % faster on one 2-core machine (reads, one worker pinned to
        # one core: ~40 -> ~35 µs of CPU a request), but ~18 % slower on another of the same
        # kind (7 paired runs: 78 vs 95 µs a read; orders within noise): a second I/O thread
        # pays off only where a thread switch is cheap, and costs where it is not. The
        # default is the safer bet.
        "runtime_mode": RuntimeModes.mt,
        "runtime_threads": RUNTIME_THREADS,
        "http1_settings": http1,
        "websockets": False,
        # Connections each worker serves at once; more wait in the kernel's accept queue.
        "backpressure": settings.http_max_connections,
        "log_level": LogLevels(settings.log_level),
        "log_dictconfig": logging_config(settings),
        "log_access": False,  # observability's request log writes one line per request instead
        "workers_kill_timeout": GRACEFUL_SHUTDOWN_SECONDS,
    }


class PortInUse(OSError):
    """Another socket listens on the address ``serve`` was asked to bind."""


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUse` if something already listens on ``host:port``.

    granian binds with ``SO_REUSEPORT`` on Linux, so a second ``serve`` on a port that one
    already serves would not fail: it would join it, the kernel splitting connections between
    two servers. A plain bind first (``SO_REUSEADDR`` only, as servers bind, so the closed
    connections of an earlier run, in TIME_WAIT, do not count) fails while any socket listens
    there. Two ``serve`` started in the same instant can still both pass it; port 0 (any free
    port) is not checked.
    """
    if port == 0:
        return
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(exc.errno, "already in use by another process") from exc
            raise


def served_app() -> ASGIApp:
    """The app as each of ``serve``'s workers runs it (granian's factory target): guarded, its
    threads under the scheduling the settings ask for."""
    from commerce_api.app.factory import create_app

    die_with_parent()  # a SIGKILLed serve (by hand, an OOM kill) leaves no worker behind
    _give_back_large_frees()
    settings = Settings()
    return in_worker(guarded(create_app(settings), settings), settings)


def in_worker(app: ASGIApp, settings: Settings) -> ASGIApp:
    """``app`` as a worker serves it: the worker's threads under the scheduling ``settings``
    asks for. (``bench/ceiling.py`` serves its app so too.)"""
    if settings.http_batch_scheduling:
        schedule_as_batch()
    return app


def guarded(app: ASGIApp, settings: Settings) -> ASGIApp:
    """``app`` as ``serve`` runs it: inside ServerGuardMiddleware, inside granian's
    proxy-headers wrapper when ``COMMERCE_TRUSTED_PROXIES`` lists any proxy."""
    from commerce_api.app.server_guard import ServerGuardMiddleware

    app = ServerGuardMiddleware(
        app,
        max_header_bytes=settings.http_max_header_bytes,
        max_headers=settings.http_max_headers,
        max_requests_per_client=settings.http_max_requests_per_client,
        body_timeout=settings.http_body_timeout_seconds,
    )
    if settings.trusted_proxies:
        from granian.utils.proxies import wrap_asgi_with_proxy_headers

        app = wrap_asgi_with_proxy_headers(app, trusted_hosts=list(settings.trusted_proxies))
    return app


def schedule_as_batch() -> None:
    """Put the calling thread, and every thread it starts from now on, under Linux's
    ``SCHED_BATCH`` policy (sched(7)), where the platform has it and permits it.

    Why: a worker is two threads that hand every request to each other (granian's I/O thread
    parses it and wakes the app's event loop; the loop answers and wakes the I/O thread). Under
    the default policy each wake-up preempts the waker, so on a busy core the two switch about
    twice a request. ``SCHED_BATCH`` is the policy sched(7) names for "a deterministic
    scheduling policy without interactivity causing extra preemptions (between the workload's
    tasks)": the woken thread waits for the running one to block, which then hands over many
    requests at once. Measured on one pinned worker (docs/performance.md): 2.1 -> 0.1
    context switches a request, server CPU 25 -> 13.5 µs a request for a constant answer. It
    gives no priority over other processes (the same nice level); other processes' wake-ups
    still preempt ours. Called in each worker before granian starts its threads (which inherit
    the policy)."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return
    # Not permitted here (a restricted container, say): the default stays.
    with suppress(OSError):
        os.sched_setscheduler(0, policy, os.sched_param(0))


_M_MMAP_THRESHOLD = -3  # mallopt(3)
LARGE_ALLOCATION = 128 * 1024  # glibc's own default threshold


def _give_back_large_frees() -> None:
    """Every allocation of 128 KiB or more in a worker gets pages of its own, returned to the
    system when it is freed (glibc's ``mallopt(M_MMAP_THRESHOLD)``, which also turns off its
    adjustment of the threshold).

    Why: glibc raises that threshold each time it frees a large block (up to 32 MiB), so once
    the catalogue's index has arrived from its build — tens of megabytes unpickled, the pickle
    freed — later blocks of up to that size come from the heap, which keeps their pages after
    they are freed. At a million products the worker's RSS after the catalogue and its search
    were built: 426 MB with the adjusting threshold, 271 MB with it fixed (docs/catalogue.md).
    Elsewhere (another C library, another system): nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, LARGE_ALLOCATION)


METRICS_DIRECTORY_PREFIX = "commerce-api-metrics-"


def remove_stale_metrics_directories(parent: str | None = None) -> list[str]:
    """Remove the metrics directories of `serve` processes that no longer run (a SIGKILLed
    one cannot remove its own); a directory's name carries its process id. The removed paths."""
    removed = []
    for path in Path(parent or tempfile.gettempdir()).glob(f"{METRICS_DIRECTORY_PREFIX}*"):
        pid_text = path.name.removeprefix(METRICS_DIRECTORY_PREFIX).split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextmanager
def metrics_directory(workers: int) -> Iterator[None]:
    """With several workers, a fresh directory where each keeps its metrics, so that any of
    them can answer /metrics for all (prometheus-client's multiprocess mode); removed after.
    Counts from a previous run must not leak in, hence always a new one."""
    if workers == 1:
        os.environ.pop(MULTIPROC_DIR_VARIABLE, None)
        yield
        return
    remove_stale_metrics_directories()
    directory = tempfile.mkdtemp(prefix=f"{METRICS_DIRECTORY_PREFIX}{os.getpid()}-")
    os.environ[MULTIPROC_DIR_VARIABLE] = directory  # inherited by the workers granian starts
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_DIR_VARIABLE, None)
        shutil.rmtree(directory, ignore_errors=True)
