"""``serve --demo``'s key, with real processes on both backends: it is issued and printed only
by a server that holds its port (a second ``serve`` on that port exits and touches no key), and
it is the same at every start of the same database (kept beside it in an owner-only file) until
it is revoked or its file is deleted."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest

from commerce_api.demo import demo_key_path
from tests.factories import cli_env, run_cli
from tests.helpers import bearer
from tests.server_process import free_port, run_serve_to_its_end, running_server

pytestmark = pytest.mark.slow


def _status(base_url: str, key: str) -> int:
    with httpx.Client(base_url=base_url, timeout=10.0) as http:
        return http.get("/v1/products", headers=bearer(key)).status_code


def _demo_key(database_url: str, workdir: Path, port: int) -> str:
    """Start ``serve --demo``, check its key works, stop it; the key."""
    with running_server(
        database_url, workdir, args=["--demo"], expect_key=True, port=port
    ) as server:
        assert server.key is not None
        assert _status(server.base_url, server.key) == 200
        return server.key


def _revoke(database_url: str, workdir: Path, secret: str) -> None:
    env = cli_env(database_url)
    keys = json.loads(run_cli(env, workdir, "keys", "list", "--json"))
    [key] = [k for k in keys if k["last4"] == secret[-4:] and k["revoked_at"] is None]
    run_cli(env, workdir, "keys", "revoke", key["id"])


def _check_the_demo_key(database_url: str, workdir: Path) -> None:
    port = free_port()
    key_file = demo_key_path(database_url, workdir)
    assert key_file is not None
    with running_server(
        database_url, workdir, args=["--demo"], expect_key=True, port=port
    ) as first:
        assert first.key is not None
        second = run_serve_to_its_end(database_url, workdir, port, args=["--demo"])
        assert second.returncode == 1, second.stderr
        assert "already in use" in second.stderr
        assert "sk_" not in second.stdout + second.stderr, "a server without its port printed a key"
        assert _status(first.base_url, first.key) == 200, "the running server's key was revoked"
    key = first.key
    assert key_file.read_text(encoding="utf-8") == key + "\n"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    assert _demo_key(database_url, workdir, port) == key, "a restart printed another key"

    _revoke(database_url, workdir, key)
    renewed = _demo_key(database_url, workdir, port)
    assert renewed != key
    assert key_file.read_text(encoding="utf-8") == renewed + "\n"

    key_file.unlink()
    with running_server(
        database_url, workdir, args=["--demo"], expect_key=True, port=port
    ) as fresh:
        assert fresh.key not in (None, renewed, key)
        assert _status(fresh.base_url, renewed) == 200, "a new key revokes nothing"
        assert _status(fresh.base_url, key) == 401
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_the_demo_key_is_printed_only_with_the_port_and_kept_on_sqlite(tmp_path: Path) -> None:
    _check_the_demo_key(f"sqlite:///{tmp_path / 'commerce.db'}", tmp_path)
    assert (tmp_path / "commerce.db.demo-key").exists(), "kept beside the database"


@pytest.mark.postgresql
def test_the_demo_key_is_printed_only_with_the_port_and_kept_on_postgresql(
    postgresql_database_url: str, tmp_path: Path
) -> None:
    _check_the_demo_key(postgresql_database_url, tmp_path)
