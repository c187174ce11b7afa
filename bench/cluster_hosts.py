"""The simulated hosts of ``bench/cluster.py``: network namespaces on this machine, made and
removed here (needs root: ``ip netns``, ``ip link``, TUN devices).

Hosts (namespaces ``<prefix>-db``, ``-api1``, ``-api2``, ``-worker``): the database host runs
its own PostgreSQL (``initdb`` into a temporary directory, as the ``postgres`` user; fsync on)
and Redis (no persistence). The root namespace reaches the database host and each API host over
a veth pair with no added delay (``10.<B>.<i>.1`` here, ``.2`` there; the load, the catalogue's
loading and the SQL checks). Each API host and the worker host reach the database host over a
link through the user-space delay line (``bench/delayline.py``, a subprocess: its own CPU): a
TUN device pair per link, ``10.<B>.<10+i>.1`` on the app side, ``.2`` on the database side.

Everything made is named with the prefix, and everything is removed by :meth:`Hosts.close`,
which runs whatever got made before a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
APP_HOSTS = ("api1", "api2", "worker")  # the delay line's links 0, 1, 2, in this order
PG_PORT = 5432
REDIS_PORT = 6379
API_PORT = 8000


def pg_bin() -> Path:
    for candidate in (Path("/usr/lib/postgresql/15/bin"), Path("/usr/local/bin")):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL's initdb is not installed")
    return Path(initdb).parent


def free_octet() -> int:
    """A second octet ``B`` no route of the root namespace uses in ``10.B.0.0/16``."""
    routes = sh("ip", "-4", "route")
    for offset in range(100):
        octet = 100 + (os.getpid() + offset) % 100
        if f"10.{octet}." not in routes:
            return octet
    raise RuntimeError("no free 10.x.0.0/16 for the cluster's links")


def cpu_seconds(pid: int) -> float:
    """A process's CPU seconds (user and system) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sh(*command: str, check: bool = True) -> str:
    """Run ``command`` (a tool on PATH: ip, runuser, ...); its output. Raises on failure with
    its error output, unless ``check`` is false."""
    result = subprocess.run(command, capture_output=True, text=True)  # noqa: S603
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")
    return result.stdout


class Hosts:
    def __init__(self, prefix: str, work: Path) -> None:
        self.prefix = prefix
        self.work = work
        self.octet = free_octet()
        self.undo: list[Callable[[], None]] = []
        self.processes: list[subprocess.Popen[bytes]] = []
        self.line: subprocess.Popen[str] | None = None

    # Names and addresses.
    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def exec(self, host: str, command: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *command]

    def root_link(self, host: str) -> str:
        """The address of ``host`` on its veth to the root namespace."""
        return f"10.{self.octet}.{('db', 'api1', 'api2').index(host)}.2"

    def db_address(self, app_host: str) -> str:
        """The database host's address on ``app_host``'s delayed link."""
        return f"10.{self.octet}.{10 + APP_HOSTS.index(app_host)}.2"

    # Making.
    def make(self) -> None:
        for host in ("db", *APP_HOSTS):
            sh("ip", "netns", "add", self.ns(host))
            self.undo.append(lambda host=host: self._remove_namespace(host))  # type: ignore[misc]
            sh("ip", "-n", self.ns(host), "link", "set", "lo", "up")
        for i, host in enumerate(("db", "api1", "api2")):
            here, there = f"{self.prefix}v{i}", f"{self.prefix}p{i}"
            sh("ip", "link", "add", here, "type", "veth", "peer", "name", there)
            sh("ip", "link", "set", there, "netns", self.ns(host))
            sh("ip", "addr", "add", f"10.{self.octet}.{i}.1/24", "dev", here)
            sh("ip", "-n", self.ns(host), "addr", "add", f"10.{self.octet}.{i}.2/24", "dev", there)
            sh("ip", "link", "set", here, "up")
            sh("ip", "-n", self.ns(host), "link", "set", there, "up")
        self._make_delay_line()
        self._start_postgres()
        self._start_redis()

    def _make_delay_line(self) -> None:
        tun = f"{self.prefix}t"
        command = [sys.executable, str(BENCH / "delayline.py"), tun, str(len(APP_HOSTS))]
        self.line = subprocess.Popen(  # noqa: S603
            [*command, str(PG_PORT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.line.stdout is not None
        if self.line.stdout.readline().strip() != "ready":
            raise RuntimeError("the delay line did not start")
        for i, host in enumerate(APP_HOSTS):
            app, db = f"{tun}a{i}", f"{tun}d{i}"
            near, far = f"10.{self.octet}.{10 + i}.1", f"10.{self.octet}.{10 + i}.2"
            sh("ip", "link", "set", app, "netns", self.ns(host))
            sh("ip", "link", "set", db, "netns", self.ns("db"))
            sh("ip", "-n", self.ns(host), "addr", "add", near, "peer", far, "dev", app)
            sh("ip", "-n", self.ns("db"), "addr", "add", far, "peer", near, "dev", db)
            sh("ip", "-n", self.ns(host), "link", "set", app, "up")
            sh("ip", "-n", self.ns("db"), "link", "set", db, "up")

    def _start_postgres(self) -> None:
        data = self.work / "pg"
        data.mkdir()
        shutil.chown(self.work, "postgres")
        shutil.chown(data, "postgres")
        self.work.chmod(0o755)
        binaries = pg_bin()
        as_postgres = ["runuser", "-u", "postgres", "--"]
        sh(*as_postgres, str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust")
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all 10.{self.octet}.0.0/16 trust\n")
        listen = ",".join([self.root_link("db"), *(self.db_address(h) for h in APP_HOSTS)])
        options = f"-c listen_addresses={listen} -c port={PG_PORT} -c fsync=on "
        options += f"-c unix_socket_directories={data} -c max_connections=200"
        pg_ctl = [*as_postgres, str(binaries / "pg_ctl"), "-D", str(data)]
        start = [*pg_ctl, "-l", str(self.work / "pg.log"), "-w", "-o", options, "start"]
        sh(*self.exec("db", start))
        self.undo.append(lambda: self._stop_postgres(pg_ctl))

    @staticmethod
    def _stop_postgres(pg_ctl: list[str]) -> None:
        sh(*pg_ctl, "-m", "fast", "-w", "stop")

    def _start_redis(self) -> None:
        binds = " ".join([self.root_link("db"), *(self.db_address(h) for h in APP_HOSTS)])
        command = ["redis-server", "--port", str(REDIS_PORT), "--bind", *binds.split()]
        command += ["--save", "", "--appendonly", "no", "--protected-mode", "no"]
        self.spawn("db", [*command, "--dir", str(self.work)], "redis.log")

    def spawn(
        self, host: str, command: list[str], log: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` on ``host`` (its own process group; stopped by :meth:`close`)."""
        with (self.work / log).open("ab") as out:
            proc = subprocess.Popen(  # noqa: S603
                self.exec(host, command),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
        """Signal ``proc``'s process group (SIGKILL: a crash) and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        if proc in self.processes:
            self.processes.remove(proc)

    def wait_healthy(self, url: str, seconds: float = 90) -> None:
        deadline = time.monotonic() + seconds
        while True:
            for proc in self.processes:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{proc.args!r} exited with {proc.returncode}: see {self.work}"
                    )
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {seconds} s")
            time.sleep(0.2)

    # The delay line.
    def tell(self, command: str) -> dict[str, object]:
        assert self.line is not None
        assert self.line.stdin is not None
        self.line.stdin.write(command + "\n")
        self.line.stdin.flush()
        if command != "stats":
            return {}
        assert self.line.stdout is not None
        stats: dict[str, object] = json.loads(self.line.stdout.readline())
        return stats

    def probe_rtt_ms(self, host: str = "api1", tries: int = 30) -> float:
        """The median TCP connect time (one round trip, kernel to kernel) from ``host`` to
        PostgreSQL through the delay line: the round trip the line actually gives."""
        code = (
            "import socket,statistics,time\nr=[]\n"
            f"for _ in range({tries}):\n"
            "    t=time.perf_counter()\n"
            f"    s=socket.create_connection(('{self.db_address(host)}',{PG_PORT}))\n"
            "    r.append(time.perf_counter()-t); s.close(); time.sleep(0.01)\n"
            "print(statistics.median(r)*1000)"
        )
        out = subprocess.run(  # noqa: S603
            self.exec(host, [sys.executable, "-c", code]),
            capture_output=True,
            text=True,
            check=True,
        )
        return float(out.stdout)

    def sql(self, query: str) -> list[list[str]]:
        """Rows of ``query``, run by psql on the database host (its Unix socket)."""
        psql = shutil.which("psql") or str(pg_bin() / "psql")
        command = [psql, "-h", str(self.work / "pg"), "-U", "postgres", "-At", "-F", "\t"]
        out = sh(*self.exec("db", [*command, "-c", query]))
        return [line.split("\t") for line in out.splitlines() if line]

    # Removing.
    def close(self) -> None:
        for proc in reversed(self.processes):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        for undo in reversed(self.undo):
            with contextlib.suppress(Exception):
                undo()
        if self.line is not None:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self.line.terminate()
                self.line.wait(5)
        for link in self.leftover_links():
            sh("ip", "link", "del", link, check=False)
        shutil.rmtree(self.work, ignore_errors=True)

    def _remove_namespace(self, host: str) -> None:
        """Kill what still runs in the namespace (only ours: it is ours), then delete it."""
        pids = sh("ip", "netns", "pids", self.ns(host), check=False).split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        sh("ip", "netns", "del", self.ns(host))

    def leftover_links(self) -> list[str]:
        out = sh("ip", "-o", "link", check=False)
        names = [line.split(": ")[1].split("@")[0] for line in out.splitlines() if ": " in line]
        return [name for name in names if name.startswith(self.prefix)]

    def leftover_namespaces(self) -> list[str]:
        out = sh("ip", "netns", "list", check=False)
        names = [line.split()[0] for line in out.splitlines() if line.strip()]
        return [name for name in names if name.startswith(f"{self.prefix}-")]
