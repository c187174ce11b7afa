"""Request coalescing: one send serves every caller that joined before it was sent, and only
those — ``Rounds`` with one result for all, ``RequestBatcher`` with a result each."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from commerce_api.core.coalescing import RequestBatcher, Rounds

T = TypeVar("T")


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


async def leave_while_sent(
    join: Callable[[str], Coroutine[Any, Any, T]], gate: asyncio.Event, started: asyncio.Event
) -> T:
    """Two callers in one flight, the first cancelled while it is being sent (held at
    ``gate``); the second's result."""
    gate.clear()
    leaving = asyncio.create_task(join("leaves"))
    staying = asyncio.create_task(join("stays"))
    await started.wait()
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    gate.set()
    return await staying


async def test_a_cancelled_caller_does_not_cancel_the_round() -> None:
    recorder = Recorder()
    rounds: Rounds[str, int] = Rounds(recorder.send)
    assert await leave_while_sent(rounds.join, recorder.gate, recorder.started) == (1, 1)


# --- RequestBatcher: a result per caller --------------------------------------------------------


class Sender:
    """A send that records its batches, answers each arg in upper case (an exception for
    ``"bad"``), and can be held open."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()

    async def held_open(self, batcher: RequestBatcher[str, str], arg: str) -> asyncio.Task[str]:
        """``arg`` submitted, its batch sent and held open until ``gate`` is set."""
        self.gate.clear()
        task = asyncio.create_task(batcher.submit(arg))
        await self.started.wait()
        return task

    async def send(self, args: list[str]) -> list[str | BaseException]:
        self.batches.append(list(args))
        self.started.set()
        await self.gate.wait()
        return [ValueError(arg) if arg == "bad" else arg.upper() for arg in args]


async def test_each_caller_gets_its_own_result_from_one_shared_send() -> None:
    sender = Sender()
    batcher: RequestBatcher[str, str] = RequestBatcher(sender.send)
    assert await asyncio.gather(*(batcher.submit(x) for x in "abc")) == ["A", "B", "C"]
    assert sender.batches == [["a", "b", "c"]]


async def test_an_exception_for_one_caller_is_raised_to_that_caller_alone() -> None:
    sender = Sender()
    batcher: RequestBatcher[str, str] = RequestBatcher(sender.send)
    results = await asyncio.gather(
        batcher.submit("a"), batcher.submit("bad"), batcher.submit("c"), return_exceptions=True
    )
    assert results[0] == "A"
    assert results[2] == "C"
    assert isinstance(results[1], ValueError)
    assert sender.batches == [["a", "bad", "c"]]


async def test_callers_arriving_during_a_send_form_the_next_batch_up_to_max_batch() -> None:
    sender = Sender()
    batcher: RequestBatcher[str, str] = RequestBatcher(sender.send, max_batch=2)
    first = await sender.held_open(batcher, "a")
    later = [asyncio.create_task(batcher.submit(x)) for x in "bcde"]
    await asyncio.sleep(0)
    sender.gate.set()
    assert [await first, *[await task for task in later]] == ["A", "B", "C", "D", "E"]
    assert sender.batches == [["a"], ["b", "c"], ["d", "e"]]


async def test_callers_with_one_exclusive_key_never_share_a_batch() -> None:
    sender = Sender()
    batcher: RequestBatcher[str, str] = RequestBatcher(sender.send, exclusive=lambda x: x[0])
    results = await asyncio.gather(*(batcher.submit(x) for x in ("k1", "j1", "k2", "k3")))
    assert results == ["K1", "J1", "K2", "K3"]
    assert sender.batches == [["k1", "j1"], ["k2"], ["k3"]]


async def test_a_cancelled_caller_s_arg_stays_in_its_batch_for_the_others() -> None:
    sender = Sender()
    batcher: RequestBatcher[str, str] = RequestBatcher(sender.send)
    assert await leave_while_sent(batcher.submit, sender.gate, sender.started) == "STAYS"
    assert sender.batches == [["leaves", "stays"]]


async def test_close_waits_for_what_was_submitted() -> None:
    sender = Sender()
    batcher: RequestBatcher[str, str] = RequestBatcher(sender.send)
    task = await sender.held_open(batcher, "a")
    closing = asyncio.create_task(batcher.close())
    await asyncio.sleep(0)
    assert not closing.done()
    sender.gate.set()
    await closing
    assert task.done()
    assert task.result() == "A"


async def test_with_two_in_flight_a_batch_is_sent_while_one_waits() -> None:
    sender = Sender()
    batcher: RequestBatcher[str, str] = RequestBatcher(sender.send, in_flight=2)
    first = await sender.held_open(batcher, "a")
    second = asyncio.create_task(batcher.submit("b"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sender.batches == [["a"], ["b"]]  # sent before the first returned
    third = [asyncio.create_task(batcher.submit(x)) for x in "cd"]  # two in flight: they wait
    await asyncio.sleep(0)
    assert sender.batches == [["a"], ["b"]]
    sender.gate.set()
    assert [await first, await second, *[await task for task in third]] == ["A", "B", "C", "D"]
    assert sorted(sender.batches[2:]) == [["c", "d"]]


async def test_an_exclusive_key_is_never_in_two_batches_in_flight() -> None:
    sender = Sender()
    batcher: RequestBatcher[str, str] = RequestBatcher(
        sender.send, in_flight=2, exclusive=lambda x: x[0]
    )
    first = await sender.held_open(batcher, "k1")
    again = asyncio.create_task(batcher.submit("k2"))  # the same key: waits for k1's batch
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sender.batches == [["k1"]]
    other = asyncio.create_task(batcher.submit("j1"))  # another key: goes at once
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sender.batches == [["k1"], ["j1"]]
    sender.gate.set()
    assert [await first, await again, await other] == ["K1", "K2", "J1"]
    assert sender.batches == [["k1"], ["j1"], ["k2"]]
    await batcher.close()
