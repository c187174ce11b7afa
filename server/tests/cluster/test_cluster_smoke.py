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
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.conditions import ROOT, SCRIPT, ours, why_not

pytestmark = pytest.mark.slow


def test_cluster_smoke_passes_and_leaves_nothing(tmp_path: Path) -> None:
    reason = why_not()
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
    assert ours(prefix) == []
    assert list(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"{prefix}-*")) == []
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert prefix not in processes
