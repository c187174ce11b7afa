"""Rounds: one send serves every caller that joined before it was sent, and only those."""

from __future__ import annotations

import asyncio

import pytest

from commerce_api.core.coalescing import Rounds


class Recorder:
    """A send that numbers its rounds, records who was in each, and can be held open."""

    def __init__(self) -> None:
        self.rounds: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()
        self.fail_next = False

    async def send(self, args: list[str]) -> int:
        self.rounds.append(list(args))
        self.started.set()
        await self.gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("round failed")
        return len(self.rounds)


async def test_callers_waiting_during_a_round_share_the_next_one() -> None:
    recorder = Recorder()
    rounds: Rounds[str, int] = Rounds(recorder.send)
    recorder.gate.clear()
    first = asyncio.create_task(rounds.join("a"))
    await recorder.started.wait()  # round 1 is in flight, sent with "a" only
    later = [asyncio.create_task(rounds.join(name)) for name in ("b", "c", "d")]
    await asyncio.sleep(0)
    recorder.gate.set()
    assert await first == (1, 0)
    # Joined after round 1 was sent: they get round 2, sent after they arrived.
    assert [await task for task in later] == [(2, 0), (2, 1), (2, 2)]
    assert recorder.rounds == [["a"], ["b", "c", "d"]]


async def test_a_caller_never_gets_a_round_sent_before_it_arrived() -> None:
    recorder = Recorder()
    rounds: Rounds[str, int] = Rounds(recorder.send)
    results = await asyncio.gather(*(rounds.join(str(i)) for i in range(20)))
    assert recorder.rounds == [[str(i) for i in range(20)]]
    assert results == [(1, i) for i in range(20)]
    assert await rounds.join("late") == (2, 0)


async def test_a_failed_round_fails_its_callers_only() -> None:
    recorder = Recorder()
    rounds: Rounds[str, int] = Rounds(recorder.send)
    recorder.fail_next = True
    results = await asyncio.gather(rounds.join("x"), rounds.join("y"), return_exceptions=True)
    assert all(isinstance(result, RuntimeError) for result in results)
    assert await rounds.join("z") == (2, 0)


async def test_a_cancelled_caller_does_not_cancel_the_round() -> None:
    recorder = Recorder()
    rounds: Rounds[str, int] = Rounds(recorder.send)
    recorder.gate.clear()
    leaving = asyncio.create_task(rounds.join("leaves"))
    staying = asyncio.create_task(rounds.join("stays"))
    await recorder.started.wait()
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    recorder.gate.set()
    assert await staying == (1, 1)
