"""``bench/cluster.py --smoke`` (issue 32): the service over simulated hosts (network
namespaces, a user-space delay line on the app <-> database links) at RTT 0 and 0.5 ms, 1 s per
scenario. It must pass its own correctness checks (stock exact, one ``order.created`` per order,
every acknowledged order stored: exit status 0) and leave no namespace, link, process or
directory of its own behind.

Skipped, saying why, where it cannot run: not root, no ``ip netns`` (a container without
CAP_NET_ADMIN), no TUN device, or no wrk / redis-server / PostgreSQL binaries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.conditions import run_cluster, skip_unless_possible

# One worker for both cluster runs: each makes hosts, a PostgreSQL and load of its own.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cluster")]


def test_cluster_smoke_passes_and_leaves_nothing(tmp_path: Path) -> None:
    skip_unless_possible("cluster smoke run")
    text = run_cluster("clt", ["--smoke"], tmp_path / "cluster.md", timeout=240)
    assert "all checks passed" in text
