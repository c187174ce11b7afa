"""``bench/cluster.py --faults-only --rtts 0.5 --faults a,b`` (issue 32, item 4; the short
version of ``make cluster``'s faults): under 8 clients placing orders and retrying with the
same Idempotency-Key, (a) an API host cut off from the database host for 10 s, silently, and
(b) ``pg_ctl restart -m fast`` of the database host's PostgreSQL. After each, checked in SQL:
every acknowledged order stored exactly once under its key, none unacknowledged, stock exact,
one ``order.created`` per order, every event delivered to a real receiver. The run must pass
(exit status 0, both rows ``ok``) and leave no namespace, link, process or directory behind.

Skipped, saying why, where it cannot run: not root, no ``ip netns`` (a container without
CAP_NET_ADMIN), no TUN device, or no wrk / redis-server / PostgreSQL binaries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.conditions import run_cluster, skip_unless_possible

# One worker for both cluster runs: each makes hosts, a PostgreSQL and load of its own.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cluster")]


def test_orders_survive_a_partition_and_a_database_restart(tmp_path: Path) -> None:
    skip_unless_possible("cluster fault run")
    arguments = ["--faults-only", "--rtts", "0.5", "--faults", "a,b"]
    text = run_cluster("clf", arguments, tmp_path / "cluster.md", timeout=300)
    assert "Faults: all checks passed" in text
    rows = [line for line in text.splitlines() if line.startswith("| (")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| (a) api1 cut off from the database 10 s",
        "| (b) pg_ctl restart -m fast",
    ]
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[-1] == "ok", row
        acked, delivered = int(cells[1].split()[0]), cells[5]
        assert acked > 0, row
        assert delivered == f"{acked}/{acked}", row
