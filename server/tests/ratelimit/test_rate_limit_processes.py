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
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.factories import cli_env, last_line, run_cli
from tests.helpers import bearer
from tests.ratelimit.test_rate_limits import redis_keys
from tests.server_process import COMMERCE_API, HOST, free_port, stderr_tail, stop_process
from tests.server_process import _wait_until_healthy as wait_until_healthy

pytestmark = pytest.mark.slow

STARTUP_TIMEOUT_SECONDS = 30.0
SHUTDOWN_TIMEOUT_SECONDS = 10.0
QUOTA = 20
REQUESTS = 60
WINDOW = 3600


def base_env(database_url: str, **settings: str) -> dict[str, str]:
    """The caller's environment without its ``COMMERCE_*`` variables, plus ``settings``."""
    # The tests' receivers listen on 127.0.0.1 (private receivers are opt-in).
    return cli_env(database_url, COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS="true", **settings)


def cli(env: Mapping[str, str], workdir: Path, *args: str) -> str:
    """Run a ``commerce-api`` command; return the last line of its standard output."""
    return last_line(run_cli(env, workdir, *args))


@dataclass(frozen=True, slots=True)
class Server:
    base_url: str
    process: subprocess.Popen[bytes]
    stderr_path: Path


def _wait_until_healthy(server: Server, deadline: float) -> None:
    try:
        wait_until_healthy(server.process, server.base_url, deadline)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stderr_tail(server.stderr_path)}") from None


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
            stack.callback(stop_process, process)
            servers.append(Server(f"http://{HOST}:{port}", process, stderr_path))
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        for server in servers:
            _wait_until_healthy(server, deadline)
        yield servers


def window_of(moment: float) -> int:
    return int(moment // WINDOW)


@pytest.mark.postgresql
async def test_processes_sharing_redis_share_one_quota(
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

    def new_client_key() -> tuple[str, str]:
        account_id = cli(env, tmp_path, "accounts", "create", "Rate limit e2e")
        assert account_id.startswith("acct_")
        key = cli(env, tmp_path, "keys", "create", "--account", account_id)
        assert key.startswith("sk_sandbox_")
        return account_id, key

    with running_servers(env, tmp_path, 2) as servers:
        urls = [f"{servers[index % 2].base_url}/v1/products" for index in range(REQUESTS)]
        # A burst that straddles the end of a (real-time, fixed) window is counted in two
        # windows: then it runs again with a new account, all in the next window (no waiting
        # for a boundary: at most one burst in an hour's worth of runs crosses one).
        accounts: list[str] = []
        for _ in range(2):
            account_id, key = new_client_key()
            accounts.append(account_id)
            started = time.time()

            def get(url: str, key: str = key) -> httpx.Response:
                return httpx.get(url, headers=bearer(key), timeout=10.0)

            with ThreadPoolExecutor(max_workers=12) as pool:
                responses = list(pool.map(get, urls))
            if window_of(started) == window_of(time.time()):
                break
        else:
            raise AssertionError("two bursts in a row straddled a window boundary")

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

        # The counter lives in Redis under the configured prefix (with the straddling
        # burst's, if one ran).
        keys = [k.decode() for k in await redis_keys(redis_url, prefix)]
        mine = [k for k in keys if k.endswith(f":{account_id}")]
        assert mine == [f"{prefix}ratelimit:{reset - WINDOW}:{account_id}"]
        assert {k.removeprefix(f"{prefix}ratelimit:").split(":")[1] for k in keys} == set(
            accounts
        ), keys


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
