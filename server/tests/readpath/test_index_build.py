"""The child process a large build runs in: its result or its error comes back, and a build
given up (cancelled) ends at once, its process terminated, without holding the event loop."""

from __future__ import annotations

import asyncio
import multiprocessing
import operator
import time

import pytest

from commerce_api.readpath.index_build import _in_child


async def test_the_childs_result_comes_back() -> None:
    assert await _in_child(operator.add, 40, 2) == 42


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
