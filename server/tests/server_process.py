"""Run ``commerce-api serve`` as real processes on free loopback ports, for end-to-end tests.

Every wait is bounded: start-up (a key on stdout, then ``/healthz`` answering 200) has a
deadline, and stopping sends SIGTERM, then SIGKILL if the process outlives its grace period.
The processes get only the settings we pass (no ``COMMERCE_*`` variable from the caller's
environment, no ``.env`` file: the working directory is the test's temporary one).
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

COMMERCE_API = Path(sys.executable).with_name("commerce-api")
HOST = "127.0.0.1"
STARTUP_TIMEOUT_SECONDS = 30.0
SHUTDOWN_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RunningServer:
    """A started, healthy server: its URL, and the key it printed (``--demo`` only)."""

    base_url: str
    key: str | None
    stdout_lines: list[str]
    stderr_path: Path
    pid: int = 0  # to kill it without warning (stopping a dead process is harmless)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _pump_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Copy a pipe's lines into a queue (``None`` at EOF), so reads can have a deadline."""
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def stderr_tail(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return text[-4000:]


def _read_key(lines: queue.Queue[str | None], seen: list[str], deadline: float) -> str:
    """The secret printed on stdout (once the server holds its port; one line here)."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no key on stdout within the deadline; stdout: {seen!r}")
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            raise AssertionError(f"stdout closed before a key was printed; stdout: {seen!r}")
        seen.append(line)
        if line.startswith("sk_"):
            return line


def _drain(lines: queue.Queue[str | None], seen: list[str]) -> None:
    """Whatever stdout holds right now, without waiting."""
    while True:
        try:
            line = lines.get_nowait()
        except queue.Empty:
            return
        if line is not None:
            seen.append(line)


def _wait_until_healthy(process: subprocess.Popen[Any], base_url: str, deadline: float) -> None:
    with httpx.Client(base_url=base_url, timeout=2.0) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"the server exited early with code {process.returncode}")
            try:
                if http.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise AssertionError(f"/healthz did not answer 200 within {STARTUP_TIMEOUT_SECONDS} s")


def stop_process(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL if ``process`` outlives its grace period (a stopped one is left)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)


def _serve_env(
    database_url: str, args: Sequence[str], settings: Mapping[str, str] | None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
    env.update({"COMMERCE_DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"})
    if "--demo" not in args:  # `--demo` opts in by itself (test_serve.py checks it)
        # The tests' receivers listen on 127.0.0.1 (private receivers are opt-in).
        env["COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS"] = "true"
    env.update(settings or {})
    return env


def run_serve_to_its_end(
    database_url: str, workdir: Path, port: int, *, args: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """Run a ``serve`` that must not start (its port is held, say) until it exits: its exit
    code and output. One still running at the start-up deadline is killed (the test fails)."""
    command = [str(COMMERCE_API), "serve", "--host", HOST, "--port", str(port), *args]
    return subprocess.run(
        command,
        cwd=workdir,
        env=_serve_env(database_url, args, None),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_SECONDS,
        check=False,
    )


class _Process:
    """One ``commerce-api serve`` child: started at once, checked by :meth:`wait_ready`."""

    def __init__(
        self,
        database_url: str,
        workdir: Path,
        name: str,
        args: Sequence[str],
        port: int,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        env = _serve_env(database_url, args, settings)
        self.base_url = f"http://{HOST}:{port}"
        self.stderr_path = workdir / f"{name}.stderr.log"
        with self.stderr_path.open("w", encoding="utf-8") as stderr:
            self.process = subprocess.Popen(
                [str(COMMERCE_API), "serve", "--host", HOST, "--port", str(port), *args],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None
        self.pump = threading.Thread(
            target=_pump_lines, args=(self.process.stdout, self.lines), daemon=True
        )
        self.pump.start()

    def wait_ready(self, deadline: float, *, expect_key: bool) -> RunningServer:
        seen: list[str] = []
        try:
            key = _read_key(self.lines, seen, deadline) if expect_key else None
            _wait_until_healthy(self.process, self.base_url, deadline)
        except AssertionError as exc:
            message = f"{exc}\n--- stderr ---\n{stderr_tail(self.stderr_path)}"
            raise AssertionError(message) from None
        if not expect_key:
            _drain(self.lines, seen)
        return RunningServer(self.base_url, key, seen, self.stderr_path, self.process.pid)

    def stop(self) -> None:
        try:
            stop_process(self.process)
        finally:
            self.pump.join(timeout=SHUTDOWN_TIMEOUT_SECONDS)
            assert self.process.stdout is not None
            self.process.stdout.close()


@contextmanager
def running_servers(
    database_url: str,
    workdir: Path,
    count: int = 1,
    *,
    args: Sequence[str] = (),
    expect_key: bool = False,
    settings: Mapping[str, str] | None = None,
    port: int | None = None,
) -> Iterator[list[RunningServer]]:
    """Start ``count`` servers on one database (at once), wait until all answer, stop them all
    when the block ends. ``expect_key``: read the key ``--demo`` prints once it serves.
    ``port``: the one server's port (default: a free one each)."""
    assert COMMERCE_API.exists(), f"{COMMERCE_API} is not installed (run `make install`)"
    assert port is None or count == 1, "one port for one server"
    processes: list[_Process] = []
    try:
        for index in range(count):
            name = "serve" if count == 1 else f"serve-{index}"
            chosen = port if port is not None else free_port()
            processes.append(_Process(database_url, workdir, name, args, chosen, settings))
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        yield [process.wait_ready(deadline, expect_key=expect_key) for process in processes]
    finally:
        errors: list[BaseException] = []
        for process in processes:  # stop every one, even if stopping another failed
            try:
                process.stop()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


@contextmanager
def running_server(
    database_url: str,
    workdir: Path,
    *,
    args: Sequence[str] = (),
    expect_key: bool = False,
    settings: Mapping[str, str] | None = None,
    port: int | None = None,
) -> Iterator[RunningServer]:
    """One server; see :func:`running_servers`."""
    with running_servers(
        database_url, workdir, 1, args=args, expect_key=expect_key, settings=settings, port=port
    ) as servers:
        yield servers[0]
