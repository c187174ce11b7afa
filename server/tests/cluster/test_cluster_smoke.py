"""``bench/cluster.py --smoke`` (issue 32): the service over simulated hosts (network
namespaces, a user-space delay line on the app <-> database links) at RTT 0 and 0.5 ms, 1 s per
scenario. It must pass its own correctness checks (stock exact, one ``order.created`` per order,
every acknowledged order stored: exit status 0) and leave no namespace, link, process or
directory of its own behind.

Skipped, saying why, where it cannot run: not root, no ``ip netns`` (a container without
CAP_NET_ADMIN), no TUN device, or no wrk / redis-server / PostgreSQL binaries.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "bench" / "cluster.py"
PG_BINARIES = (Path("/usr/lib/postgresql/15/bin"), Path("/usr/local/bin"))

pytestmark = pytest.mark.slow


def _why_not() -> str | None:
    """Why the cluster cannot be made on this machine (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, TUN devices)"
    for tool in ("ip", "wrk", "redis-server", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if shutil.which("initdb") is None and not any((d / "initdb").exists() for d in PG_BINARIES):
        return "PostgreSQL's initdb is not installed"
    if not Path("/dev/net/tun").exists():
        return "no /dev/net/tun (TUN devices)"
    probe = f"clp{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ours(prefix: str) -> list[str]:
    """Namespaces and links named with ``prefix``."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    names = [line.split()[0] for line in namespaces.splitlines() if line.strip()]
    names += [line.split(": ")[1].split("@")[0] for line in links.splitlines() if ": " in line]
    return [name for name in names if name.startswith(prefix)]


def test_cluster_smoke_passes_and_leaves_nothing(tmp_path: Path) -> None:
    reason = _why_not()
    if reason is not None:
        pytest.skip(f"cluster smoke run skipped: {reason}")
    prefix = f"clt{secrets.token_hex(3)}"
    output = tmp_path / "cluster.md"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--prefix", prefix, "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "all checks passed" in output.read_text()
    assert _ours(prefix) == []
    assert list(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"{prefix}-*")) == []
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert prefix not in processes
