"""Rate limits across real ``commerce-api serve`` processes sharing one Redis.

The scaled-out shape of docs/design.md: several stateless processes on PostgreSQL and Redis. A
client's quota is one quota however its requests are spread over the processes. And
``serve --workers N`` without Redis is refused: each worker would count on its own.

Every wait is bounded; the processes get only the ``COMMERCE_*`` settings given here, and run in
the test's temporary directory (no ``.env``). Redis keys use a unique prefix and are deleted.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis

from tests.helpers import bearer
from tests.ratelimit.test_rate_limits import REDIS_URL, REQUIRE_REDIS
from tests.server_process import COMMERCE_API, HOST, free_port, stderr_tail

pytestmark = pytest.mark.slow

STARTUP_TIMEOUT_SECONDS = 30.0
SHUTDOWN_TIMEOUT_SECONDS = 10.0
CLI_TIMEOUT_SECONDS = 60.0
QUOTA = 20
REQUESTS = 60
WINDOW = 3600


def base_env(database_url: str, **settings: str) -> dict[str, str]:
    """The caller's environment without its ``COMMERCE_*`` variables, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
    env.update({"COMMERCE_DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"})
    # The tests' receivers listen on 127.0.0.1 (private receivers are opt-in).
    env["COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS"] = "true"
    env.update(settings)
    return env


def cli(env: Mapping[str, str], workdir: Path, *args: str) -> str:
    """Run a ``commerce-api`` command; return the last line of its standard output."""
    done = subprocess.run(
        [str(COMMERCE_API), *args],
        cwd=workdir,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"{args} failed ({done.returncode}): {done.stderr}"
    return done.stdout.strip().splitlines()[-1]


@dataclass(frozen=True, slots=True)
class Server:
    base_url: str
    process: subprocess.Popen[bytes]
    stderr_path: Path


def _wait_until_healthy(server: Server, deadline: float) -> None:
    with httpx.Client(base_url=server.base_url, timeout=2.0) as http:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise AssertionError(
                    f"the server exited early with code {server.process.returncode}\n"
                    f"{stderr_tail(server.stderr_path)}"
                )
            try:
                if http.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise AssertionError(
        f"/healthz did not answer 200 within {STARTUP_TIMEOUT_SECONDS} s\n"
        f"{stderr_tail(server.stderr_path)}"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)


@contextmanager
def running_servers(env: Mapping[str, str], workdir: Path, count: int) -> Iterator[list[Server]]:
    """Start ``count`` servers with ``env`` (at once), wait until all answer, stop them all."""
    assert COMMERCE_API.exists(), f"{COMMERCE_API} is not installed (run `make install`)"
    with ExitStack() as stack:
        servers: list[Server] = []
        for index in range(count):
            port = free_port()
            stderr_path = workdir / f"serve-{index}.stderr.log"
            stderr = stack.enter_context(stderr_path.open("wb"))
            process = subprocess.Popen(
                [str(COMMERCE_API), "serve", "--host", HOST, "--port", str(port)],
                cwd=workdir,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            stack.callback(_stop, process)
            servers.append(Server(f"http://{HOST}:{port}", process, stderr_path))
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        for server in servers:
            _wait_until_healthy(server, deadline)
        yield servers


@pytest.fixture
def redis_prefix() -> Iterator[tuple[str, str]]:
    """A reachable Redis and a unique key prefix; the prefix's keys are deleted afterwards."""
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        try:
            client.ping()
        except Exception as exc:
            message = f"Redis is not reachable at {REDIS_URL}: {exc!r}"
            if REQUIRE_REDIS:
                pytest.fail(message)
            pytest.skip(message + " (set COMMERCE_TEST_REDIS_URL)")
        prefix = f"commerce-test-{uuid.uuid4().hex}:"
        try:
            yield REDIS_URL, prefix
        finally:
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


def _wait_clear_of_a_window_boundary(margin: float = 30.0) -> None:
    """If the (real-time) window ends within ``margin`` seconds, wait until the next one."""
    left = WINDOW - time.time() % WINDOW
    if left < margin:
        time.sleep(left + 1.0)


@pytest.mark.postgresql
def test_processes_sharing_redis_share_one_quota(
    postgresql_database_url: str, redis_prefix: tuple[str, str], tmp_path: Path
) -> None:
    redis_url, prefix = redis_prefix
    env = base_env(
        postgresql_database_url,
        COMMERCE_REDIS_URL=redis_url,
        COMMERCE_REDIS_KEY_PREFIX=prefix,
        COMMERCE_RATE_LIMIT_DEVELOPMENT=str(QUOTA),
        COMMERCE_RATE_LIMIT_WINDOW_SECONDS=str(WINDOW),
    )
    cli(env, tmp_path, "migrate")
    account_id = cli(env, tmp_path, "accounts", "create", "Rate limit e2e")
    assert account_id.startswith("acct_")
    key = cli(env, tmp_path, "keys", "create", "--account", account_id)
    assert key.startswith("sk_sandbox_")

    with running_servers(env, tmp_path, 2) as servers:
        _wait_clear_of_a_window_boundary()
        urls = [f"{servers[index % 2].base_url}/v1/products" for index in range(REQUESTS)]

        def get(url: str) -> httpx.Response:
            return httpx.get(url, headers=bearer(key), timeout=10.0)

        with ThreadPoolExecutor(max_workers=12) as pool:
            responses = list(pool.map(get, urls))

        statuses = [response.status_code for response in responses]
        assert statuses.count(200) == QUOTA, statuses
        assert statuses.count(429) == REQUESTS - QUOTA, statuses
        # Both processes served some of the admitted requests, and refused some.
        for server in servers:
            served = [
                r.status_code for r in responses if str(r.url).startswith(server.base_url + "/")
            ]
            assert served.count(200) > 0
            assert served.count(429) > 0
        admitted = sorted(
            int(r.headers["x-ratelimit-remaining"]) for r in responses if r.status_code == 200
        )
        assert admitted == list(range(QUOTA)), "one count, shared by both processes"
        resets = {r.headers["x-ratelimit-reset"] for r in responses}
        assert len(resets) == 1, resets
        reset = int(resets.pop())
        assert reset % WINDOW == 0
        assert 0 < reset - time.time() <= WINDOW
        for response in responses:
            assert response.headers["x-ratelimit-limit"] == str(QUOTA)
            if response.status_code == 429:
                assert response.json()["error"]["code"] == "rate_limited"
                assert response.headers["x-ratelimit-remaining"] == "0"
                assert 1 <= int(response.headers["retry-after"]) <= WINDOW

        # The counter lives in Redis under the configured prefix.
        client = redis.Redis.from_url(redis_url, socket_connect_timeout=2, socket_timeout=2)
        try:
            keys = [k.decode() for k in client.scan_iter(match=f"{prefix}*", count=1000)]
        finally:
            client.close()
        assert keys == [f"{prefix}ratelimit:{reset - WINDOW}:{account_id}"]


def _refuses_to_connect(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        return sock.connect_ex((HOST, port)) != 0


def test_serve_with_several_workers_needs_redis(tmp_path: Path) -> None:
    env = base_env(f"sqlite:///{tmp_path / 'commerce.db'}")
    port = free_port()
    # Its own session, so that if it did start (with workers), the whole group can be stopped.
    process = subprocess.Popen(
        [str(COMMERCE_API), "serve", "--host", HOST, "--port", str(port), "--workers", "2"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=30.0)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=SHUTDOWN_TIMEOUT_SECONDS)
        pytest.fail("`serve --workers 2` without COMMERCE_REDIS_URL started instead of refusing")
    assert process.returncode != 0, (stdout, stderr)
    assert "COMMERCE_REDIS_URL" in stderr, stderr
    assert _refuses_to_connect(port), "nothing listens on the port"
