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

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.conditions import ROOT, SCRIPT, ours, why_not

pytestmark = pytest.mark.slow


def test_orders_survive_a_partition_and_a_database_restart(tmp_path: Path) -> None:
    reason = why_not()
    if reason is not None:
        pytest.skip(f"cluster fault run skipped: {reason}")
    prefix = f"clf{secrets.token_hex(3)}"
    output = tmp_path / "cluster.md"
    command = [sys.executable, str(SCRIPT), "--faults-only", "--rtts", "0.5", "--faults", "a,b"]
    result = subprocess.run(
        [*command, "--prefix", prefix, "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    text = output.read_text()
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
    assert ours(prefix) == []
    assert list(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"{prefix}-*")) == []
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert prefix not in processes
