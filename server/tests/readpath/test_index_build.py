"""The child process a large build runs in: its result or its error comes back; a build given
up (cancelled) ends at once, its process terminated, without holding the event loop; a killed
worker (the parent) leaves no build running (Linux)."""

from __future__ import annotations

import asyncio
import multiprocessing
import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commerce_api.readpath.index_build import BUILD_NICENESS, _in_child


async def test_the_childs_result_comes_back() -> None:
    assert await _in_child(operator.add, 40, 2) == 42


async def test_the_child_yields_the_core_to_the_worker() -> None:
    assert await _in_child(os.nice, 0) == min(os.nice(0) + BUILD_NICENESS, 19)


async def test_the_childs_error_is_raised_here() -> None:
    with pytest.raises(ZeroDivisionError):
        await _in_child(operator.truediv, 1, 0)


async def test_a_cancelled_build_ends_at_once_and_its_process_with_it() -> None:
    started = asyncio.Event()
    building = asyncio.create_task(_in_child(time.sleep, 60))
    loop = asyncio.get_running_loop()
    loop.call_later(0.5, started.set)
    await started.wait()  # the child is up (spawned), sleeping
    assert any(child.name == "commerce-api-build" for child in multiprocessing.active_children())
    held = 0.0

    async def probe() -> None:  # the loop's longest stall while the build is cancelled
        nonlocal held
        while not building.done():
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            held = max(held, time.perf_counter() - before)

    watching = asyncio.create_task(probe())
    began = time.perf_counter()
    building.cancel()
    with pytest.raises(asyncio.CancelledError):
        await building
    await watching
    assert time.perf_counter() - began < 5  # not the child's 60 s
    assert held < 0.5
    assert not [c for c in multiprocessing.active_children() if c.name == "commerce-api-build"]


PARENT = """
import asyncio, multiprocessing, time
from commerce_api.readpath.index_build import BUILD_NICENESS, _in_child

async def main():
    building = asyncio.create_task(_in_child(time.sleep, 60))
    while not multiprocessing.active_children():
        await asyncio.sleep(0.05)
    print(multiprocessing.active_children()[0].pid, flush=True)
    await building

if __name__ == "__main__":
    asyncio.run(main())
"""


def test_a_killed_worker_leaves_no_build_running(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _running(child):
            time.sleep(0.05)
        assert not _running(child)
    finally:
        parent.kill()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has ended (its parent, init, reaps it)
