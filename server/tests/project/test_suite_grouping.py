"""``make test``'s ``--dist loadgroup`` keeps an ``xdist_group`` on one worker.

Modules that build in the work tree (``test_dist.py``) or start one server for all their tests
(the cluster and order-concurrency modules) say ``pytest.mark.xdist_group``. When a pytest and
pytest-xdist pair stops honouring the mark, nothing fails at once: the tests run on several
workers and race (two ``make dist`` builds of ``client-ts/`` at once). This runs a small module
of grouped tests on two workers and checks that one worker ran them all.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GROUPED = """
import pytest

pytestmark = [pytest.mark.skipif(False, reason="a second mark"), pytest.mark.xdist_group("one")]


@pytest.mark.parametrize("i", range(6))
def test_grouped(i: int) -> None:
    pass
"""


def test_an_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "test_grouped.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers = re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED", done.stdout)
    assert len(workers) == 6, done.stdout[-2000:]
    assert len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}:\n{done.stdout}"
