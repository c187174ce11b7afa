"""Request ids (``http.context.new_request_id``): a per-process random prefix and a counter."""

from __future__ import annotations

import os
import re

from commerce_api.core.ids import looks_like
from commerce_api.http import context
from commerce_api.http.context import new_request_id

REQUEST_ID = re.compile(r"req_[A-Za-z0-9]{24}")


def prefix_of(request_id: str) -> str:
    """``req_`` and the 12 random characters: the part drawn once per process."""
    return request_id[: len("req_") + 12]


def test_request_ids_are_unique_and_well_formed_over_100k_calls() -> None:
    values = [new_request_id() for _ in range(100_000)]
    assert len(set(values)) == len(values)
    for value in values:
        assert REQUEST_ID.fullmatch(value), value
    assert looks_like("req", values[0])
    assert looks_like("req", values[-1])
    assert not looks_like("ord", values[0])


def test_request_ids_of_one_process_share_a_prefix_and_count_up() -> None:
    first, second, third = new_request_id(), new_request_id(), new_request_id()
    assert prefix_of(first) == prefix_of(second) == prefix_of(third)
    counters = [int(value[len(prefix_of(value)) :], 16) for value in (first, second, third)]
    assert counters[1] == counters[0] + 1
    assert counters[2] == counters[1] + 1


def test_after_a_fork_the_prefix_is_drawn_again() -> None:
    """A real fork: the child's ids get a prefix of their own and count from one; the
    parent's go on as before."""
    parent = new_request_id()
    child = _ids_of_a_forked_child(3)
    assert prefix_of(child[0]) != prefix_of(parent), "the child must not reuse the parent's"
    assert {prefix_of(value) for value in child} == {prefix_of(child[0])}
    assert child[0].endswith(f"{1:012x}"), "the child's counter starts again"
    assert all(REQUEST_ID.fullmatch(value) for value in child)
    assert parent not in child

    # A second child gets yet another prefix; the parent keeps its own.
    second = _ids_of_a_forked_child(1)
    assert prefix_of(second[0]) not in {prefix_of(parent), prefix_of(child[0])}
    again = new_request_id()
    assert prefix_of(again) == prefix_of(parent)
    assert again not in {parent, *child, *second}


def _ids_of_a_forked_child(count: int) -> list[str]:
    """``count`` request ids made in a forked child process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its ids and leave at once (no pytest teardown here)
        try:
            os.write(write_end, " ".join(new_request_id() for _ in range(count)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    return text.split()


def test_a_fresh_generator_numbers_from_one() -> None:
    generate = context._RequestIds()
    values = [generate() for _ in range(3)]
    assert [value[-12:] for value in values] == [f"{n:012x}" for n in (1, 2, 3)]
    assert len({prefix_of(value) for value in values}) == 1
