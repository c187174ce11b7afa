"""Run Debian's PgBouncer in transaction pooling in front of the test PostgreSQL server.

A process of our own on a free loopback port, with its configuration in a temporary directory
(never the system service's): ``pool_mode = transaction``, ``auth_type = trust`` for the one
user of the test URL, every database name routed to the test server (``* = host=… port=…``),
at most 8 server connections a database: each test worker runs a PgBouncer of its own, and
together they must leave the server's 100 connections room for the workers' direct ones.
PgBouncer refuses to run as root, so as root it runs as the ``postgres`` user. Stopping sends
SIGTERM (PgBouncer's immediate shutdown), then SIGKILL if it outlives its grace period.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.server_process import HOST, free_port

STARTUP_TIMEOUT_SECONDS = 10.0
SHUTDOWN_TIMEOUT_SECONDS = 5.0
RUN_AS = "postgres"  # PgBouncer's own user on Debian (it will not run as root)

# The tested configuration (docs/deployment.md shows the same lines).
CONFIG = """\
[databases]
* = host={host} port={port}{password}

[pgbouncer]
listen_addr = {listen}
listen_port = {listen_port}
unix_socket_dir =
pool_mode = transaction
auth_type = trust
auth_file = {directory}/userlist.txt
max_client_conn = 1000
default_pool_size = 8
logfile = {directory}/pgbouncer.log
pidfile = {directory}/pgbouncer.pid
"""


def executable() -> str | None:
    """PgBouncer's program (Debian's package puts it in /usr/sbin), or None."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")


@dataclass(frozen=True, slots=True)
class RunningPgBouncer:
    port: int
    directory: Path

    def url_for(self, direct_url: str) -> str:
        """``direct_url`` (a PostgreSQL URL of the server behind us) through this PgBouncer,
        with the service's option that says so (``?pooler=pgbouncer``)."""
        url = make_url(direct_url).set(host=HOST, port=self.port)
        return url.update_query_dict({"pooler": "pgbouncer"}).render_as_string(False)

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


@contextmanager
def running_pgbouncer(direct_url: str) -> Iterator[RunningPgBouncer]:
    """PgBouncer in transaction pooling in front of the server of ``direct_url``."""
    program = executable()
    if program is None:
        raise FileNotFoundError("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    server = make_url(direct_url)
    directory = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    port = free_port()
    password = f" password={server.password}" if server.password else ""
    (directory / "pgbouncer.ini").write_text(
        CONFIG.format(
            host=server.host or HOST,
            port=server.port or 5432,
            password=password,
            listen=HOST,
            listen_port=port,
            directory=directory,
        )
    )
    (directory / "userlist.txt").write_text(f'"{server.username or RUN_AS}" ""\n')
    user: str | None = None
    if os.geteuid() == 0:
        user = RUN_AS
        account = pwd.getpwnam(RUN_AS)
        for path in (directory, *directory.iterdir()):
            os.chown(path, account.pw_uid, account.pw_gid)
    process = subprocess.Popen(
        [program, str(directory / "pgbouncer.ini")],
        user=user,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_listening(process, port, directory)
        yield RunningPgBouncer(port, directory)
    finally:
        _stop(process)
        shutil.rmtree(directory, ignore_errors=True)


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, directory: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = (directory / "pgbouncer.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"pgbouncer exited ({process.returncode}): {log}")
        log_path = directory / "pgbouncer.log"
        if log_path.exists() and f"listening on {HOST}:{port}" in log_path.read_text():
            return
        time.sleep(0.05)
    raise TimeoutError(f"pgbouncer did not listen on {HOST}:{port} within its deadline")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(SHUTDOWN_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
