"""The request log (``commerce_api.observability.access``): the same lines as the logging
formatters would write for the same request, batched writes (the request observer's batch,
``http.pipeline.RequestObserver``) that never split a line, and nothing at all when the
``commerce_api.access`` logger is off.

stderr is replaced by a fake that records each ``write`` call. Every wait is a bounded poll.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commerce_api.http.context import RequestContext
from commerce_api.http.pipeline import RequestObserver
from commerce_api.observability import AnsweredRequest, access
from commerce_api.observability.access import LOGGER_NAME, MAX_WRITE_BYTES, AccessLog
from commerce_api.observability.logging import JsonFormatter, TextFormatter

WAIT_SECONDS = 5.0
JSON_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
TEXT_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}")
TEXT_TIME_LENGTH = len("2026-11-21 08:12:41,123")
BATCH_SIZE = RequestObserver.BATCH_SIZE
FLUSH_SECONDS = RequestObserver.FLUSH_SECONDS


@dataclass
class FakeStderr:
    """Records each write (a batch of lines) and each flush."""

    writes: list[str] = field(default_factory=list)
    flushes: int = 0
    error: type[Exception] | None = None

    def write(self, text: str) -> int:
        if self.error is not None:
            raise self.error("stderr is gone")
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        self.flushes += 1

    @property
    def lines(self) -> list[str]:
        return "".join(self.writes).splitlines()


@pytest.fixture
def stderr(monkeypatch: pytest.MonkeyPatch) -> FakeStderr:
    """The fake, as the ``sys.stderr`` the request log sees. (Through the module's ``sys``:
    pytest's own capture puts its stream back into ``sys.stderr`` when the test starts.)"""
    fake = FakeStderr()
    monkeypatch.setattr(access, "sys", SimpleNamespace(stderr=fake))
    return fake


@pytest.fixture(autouse=True)
def access_logger() -> Iterator[logging.Logger]:
    """The ``commerce_api.access`` logger, on (INFO) unless a test says otherwise; its level
    restored afterwards."""
    logger = logging.getLogger(LOGGER_NAME)
    saved = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield logger
    finally:
        logger.setLevel(saved)


@dataclass(frozen=True)
class Request:
    request_id: str | None
    account_id: str | None
    key_id: str | None
    route: str
    method: str
    status: int
    seconds: float

    def answered(self, now: float | None = None) -> AnsweredRequest:
        """What the request observer hands the log for this request, answered at ``now``."""
        return (
            self.route,
            self.method,
            self.status,
            self.seconds,
            time.time() if now is None else now,
            self.request_id,
            self.account_id,
            self.key_id,
        )

    def record(self, observer: RequestObserver) -> None:
        """Answer it through the observer, as the request pipeline does."""
        assert self.request_id is not None
        principal: Any = SimpleNamespace(account_id=self.account_id, key_id=self.key_id)
        ctx = RequestContext(self.request_id, principal=principal)
        observer.observe({"method": self.method}, ctx, self.route, self.status, self.seconds)

    def log_record(self) -> logging.LogRecord:
        """The record the request log used to go through ``logging`` with (the same message,
        arguments and ``extra`` fields, in the same order)."""
        duration_ms = round(self.seconds * 1000, 2)
        return logging.makeLogRecord(
            {
                "name": LOGGER_NAME,
                "levelno": logging.INFO,
                "levelname": "INFO",
                "msg": "%s %s %s %.2fms",
                "args": (self.method, self.route, self.status, duration_ms),
                "request_id": self.request_id,
                "account_id": self.account_id,
                "key_id": self.key_id,
                "route": self.route,
                "method": self.method,
                "status": self.status,
                "duration_ms": duration_ms,
            }
        )


REQUESTS = [
    Request("req_abc", "acct_1", "key_1", "/v1/products", "GET", 200, 0.000812),
    Request("req_def", "acct_2", "key_2", "/v1/products/{id}", "GET", 404, 0.0015),
    Request("req_ghi", None, None, "/v1/orders", "POST", 401, 0.0),
    Request(None, None, "key_admin", "/v1/products", "POST", 201, 1.23456),
    Request("req_jkl", "acct_3", "key_3", "unmatched", "DELETE", 405, 12.345678),
    Request("req_mno", "acct_4", "key_4", "/v1/orders/{id}/cancel", "POST", 409, 0.0049999),
    Request("req_pqr", "acct_5", "key_5", "/v1/orders", "POST", 429, 0.1),
    Request("req_stu", "acct_6", "key_6", "/readyz", "GET", 503, 30.0),
]


def written_one(log: AccessLog, request: Request, stderr: FakeStderr) -> str:
    log.write_many([request.answered()])
    [line] = stderr.lines
    stderr.writes.clear()
    return line


def access_line(number: int) -> Request:
    return Request(f"req_{number:024d}", "acct_x", "key_x", "/v1/products", "GET", 200, 0.001)


async def wait_for_writes(stderr: FakeStderr, count: int = 1) -> None:
    """Until ``count`` writes have been made (a poll with a deadline)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while len(stderr.writes) < count:
        assert time.monotonic() < deadline, f"not {count} writes within {WAIT_SECONDS} s"
        await asyncio.sleep(0.005)


# --- the lines ---------------------------------------------------------------------------------


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: f"{r.method}-{r.status}")
def test_json_lines_are_the_json_formatters_lines_for_the_same_request(
    request_: Request, stderr: FakeStderr
) -> None:
    before = time.time()
    line = written_one(AccessLog("json"), request_, stderr)
    after = time.time()
    expected_line = JsonFormatter().format(request_.log_record())
    fields, expected = json.loads(line), json.loads(expected_line)

    assert list(fields) == list(expected)  # the same keys, in the same order
    assert list(fields) == [
        "time",
        "level",
        "logger",
        "message",
        "request_id",
        "account_id",
        "key_id",
        "route",
        "method",
        "status",
        "duration_ms",
    ]
    for name in fields.keys() - {"time"}:
        assert fields[name] == expected[name], name
        assert type(fields[name]) is type(expected[name]), name
    # byte for byte, apart from the time
    assert line.replace(fields["time"], expected["time"], 1) == expected_line

    assert JSON_TIME.fullmatch(fields["time"]), fields["time"]
    stamp = datetime.strptime(fields["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert math.floor(before * 1000) <= round(stamp.timestamp() * 1000) <= after * 1000


def test_json_line_values(stderr: FakeStderr) -> None:
    request = Request("req_1", "acct_1", "key_1", "/v1/products/{id}", "GET", 200, 0.0012345)
    fields = json.loads(written_one(AccessLog("json"), request, stderr))
    assert fields["level"] == "info"
    assert fields["logger"] == "commerce_api.access"
    assert fields["message"] == "GET /v1/products/{id} 200 1.23ms"
    assert fields["duration_ms"] == 1.23
    assert fields["status"] == 200


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: f"{r.method}-{r.status}")
def test_text_lines_are_the_text_formatters_lines_for_the_same_request(
    request_: Request, stderr: FakeStderr
) -> None:
    line = written_one(AccessLog("text"), request_, stderr)
    expected = TextFormatter().format(request_.log_record())
    assert TEXT_TIME.fullmatch(line[:TEXT_TIME_LENGTH]), line
    assert TEXT_TIME.fullmatch(expected[:TEXT_TIME_LENGTH]), expected
    assert line[TEXT_TIME_LENGTH:] == expected[TEXT_TIME_LENGTH:]


def test_text_line_layout(stderr: FakeStderr) -> None:
    request = Request(None, None, None, "/v1/orders", "POST", 401, 0.0005)
    line = written_one(AccessLog("text"), request, stderr)
    assert line[TEXT_TIME_LENGTH:] == (
        " INFO    commerce_api.access: POST /v1/orders 401 0.50ms request_id=None "
        "account_id=None key_id=None route=/v1/orders method=POST status=401 duration_ms=0.5"
    )


def test_text_time_is_local_time_like_asctime(stderr: FakeStderr) -> None:
    before = time.localtime()
    line = written_one(AccessLog("text"), REQUESTS[0], stderr)
    after = time.localtime()
    seconds = line[: len("2026-11-21 08:12:41")]
    layout = "%Y-%m-%d %H:%M:%S"
    assert time.strftime(layout, before) <= seconds <= time.strftime(layout, after)


# --- batching ----------------------------------------------------------------------------------


async def test_a_few_lines_wait_for_flush(stderr: FakeStderr) -> None:
    observer = RequestObserver(None, AccessLog("json"))
    for number in range(3):
        access_line(number).record(observer)
    assert stderr.writes == [], "fewer than BATCH_SIZE lines wait"
    observer.flush()
    assert len(stderr.writes) == 1, "one write for the batch"
    assert stderr.writes[0].endswith("\n")
    assert [json.loads(line)["request_id"] for line in stderr.lines] == [
        f"req_{number:024d}" for number in range(3)
    ]
    assert stderr.flushes == 1
    observer.flush()  # nothing left: nothing written
    assert len(stderr.writes) == 1


async def test_a_few_lines_are_written_by_the_timer(stderr: FakeStderr) -> None:
    observer = RequestObserver(None, AccessLog("json"))
    for number in range(2):
        access_line(number).record(observer)
    assert stderr.writes == []
    await wait_for_writes(stderr)
    assert len(stderr.writes) == 1
    assert len(stderr.lines) == 2
    # the timer is one-shot: the next line starts a new one
    access_line(2).record(observer)
    assert len(stderr.writes) == 1
    await asyncio.sleep(0)
    await wait_for_writes(stderr, 2)
    assert json.loads(stderr.writes[1])["request_id"] == f"req_{2:024d}"


async def test_the_timer_fires_about_flush_seconds_after_the_first_line(
    stderr: FakeStderr, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delay is FLUSH_SECONDS, read when the first line of a batch arrives."""
    delays: list[float] = []
    loop = asyncio.get_running_loop()
    original = loop.call_later

    def spy(delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        delays.append(delay)
        return original(delay, callback, *args)

    monkeypatch.setattr(loop, "call_later", spy)
    observer = RequestObserver(None, AccessLog("json"))
    for number in range(5):
        access_line(number).record(observer)
    assert delays == [FLUSH_SECONDS], "one timer per batch, set by its first line"
    observer.flush()


async def test_batch_lines_lines_are_written_at_once(stderr: FakeStderr) -> None:
    observer = RequestObserver(None, AccessLog("json"))
    for number in range(BATCH_SIZE - 1):
        access_line(number).record(observer)
    assert stderr.writes == []
    timer = observer._batch.timer
    assert timer is not None
    access_line(BATCH_SIZE - 1).record(observer)
    assert len(stderr.lines) == BATCH_SIZE, "written without waiting for the timer"
    assert observer._batch.timer is None, "the timer of the written batch is cancelled"
    assert timer.cancelled(), "so it writes nothing more"
    # A sentinel: the next line's timer fires after the cancelled one would have; by then
    # only that line has been written since.
    written = len(stderr.writes)
    access_line(BATCH_SIZE).record(observer)
    await wait_for_writes(stderr, written + 1)
    assert len(stderr.writes) == written + 1
    assert len(stderr.lines) == BATCH_SIZE + 1


def test_without_a_running_loop_each_line_is_written_at_once(stderr: FakeStderr) -> None:
    observer = RequestObserver(None, AccessLog("json"))
    for number in range(3):
        access_line(number).record(observer)
        assert len(stderr.writes) == number + 1
    assert all(write.count("\n") == 1 for write in stderr.writes)


async def test_writes_are_at_most_max_write_bytes_and_end_on_a_line(stderr: FakeStderr) -> None:
    observer = RequestObserver(None, AccessLog("json"))
    requests = [
        Request(f"req_{n}", "acct_x", "key_x", "/v1/" + "r" * (n * 7 % 300), "GET", 200, 0.001)
        for n in range(BATCH_SIZE - 1)  # one flush: the lines of one batch
    ]
    for request in requests:
        request.record(observer)
    observer.flush()
    expected_lines = [json.loads(line)["request_id"] for line in stderr.lines]
    assert expected_lines == [request.request_id for request in requests], "all, in order"
    assert sum(len(write) for write in stderr.writes) > 3 * MAX_WRITE_BYTES
    assert len(stderr.writes) > 3
    for index, write in enumerate(stderr.writes):
        assert write.endswith("\n"), "a write ends on a line"
        assert len(write.encode()) <= MAX_WRITE_BYTES
        for line in write.splitlines():
            json.loads(line)  # no line is cut
        if index + 1 < len(stderr.writes):
            # as full as it could be: the next line would not have fitted
            next_line = stderr.writes[index + 1].split("\n", 1)[0]
            assert len(write) + len(next_line) + 1 > MAX_WRITE_BYTES


async def test_batches_written_by_count_also_respect_max_write_bytes(stderr: FakeStderr) -> None:
    observer = RequestObserver(None, AccessLog("text"))
    requests = [
        Request(f"req_{n}", "acct_x", "key_x", "/v1/" + "q" * (n * 11 % 500), "GET", 200, 0.0)
        for n in range(BATCH_SIZE * 3)
    ]
    for request in requests:
        request.record(observer)
    assert len(stderr.lines) == BATCH_SIZE * 3, "three full batches, written at once"
    for write in stderr.writes:
        assert write.endswith("\n")
        assert len(write.encode()) <= MAX_WRITE_BYTES
    assert [line.split("request_id=")[1].split(" ")[0] for line in stderr.lines] == [
        request.request_id for request in requests
    ]


async def test_a_line_longer_than_max_write_bytes_is_written_alone(stderr: FakeStderr) -> None:
    observer = RequestObserver(None, AccessLog("text"))
    long_route = "/v1/" + "x" * (MAX_WRITE_BYTES * 2)
    requests = [
        access_line(0),
        access_line(1),
        Request("req_long", "acct_x", "key_x", long_route, "GET", 200, 0.001),
        access_line(2),
    ]
    for request in requests:
        request.record(observer)
    observer.flush()
    assert len(stderr.writes) == 3
    first, long, last = stderr.writes
    assert first.count("\n") == 2
    assert long.count("\n") == 1
    assert long.endswith("\n")
    assert len(long) > MAX_WRITE_BYTES
    assert long_route in long
    assert last.count("\n") == 1


@pytest.mark.parametrize("error", [OSError, ValueError])
def test_a_closed_stderr_does_not_fail_the_request(
    stderr: FakeStderr, error: type[Exception]
) -> None:
    stderr.error = error
    observer = RequestObserver(None, AccessLog("json"))
    access_line(0).record(observer)  # no running loop: written (or not) at once, without raising
    observer.flush()
    stderr.error = None
    access_line(1).record(observer)
    assert [json.loads(line)["request_id"] for line in stderr.lines] == [f"req_{1:024d}"]


def test_the_constants_keep_writes_atomic_on_a_pipe() -> None:
    assert MAX_WRITE_BYTES <= 4096  # PIPE_BUF on Linux
    assert BATCH_SIZE > 1
    assert 0 < FLUSH_SECONDS < 1


# --- the logger's level ------------------------------------------------------------------------


def observed() -> tuple[dict[str, Any], RequestContext]:
    principal: Any = SimpleNamespace(account_id="acct_obs", key_id="key_obs")
    return {"method": "POST"}, RequestContext("req_obs", principal=principal)


async def test_nothing_is_written_when_the_access_logger_is_off(
    stderr: FakeStderr, access_logger: logging.Logger
) -> None:
    access_logger.setLevel(logging.WARNING)
    observer = RequestObserver(None, AccessLog("json"))
    for status in (200, 201, 404, 500):
        observer.observe(*observed(), "/v1/orders", status, 0.002)
    assert observer._batch.timer is None, "without metrics, nothing is even noted"
    observer.flush()
    assert stderr.writes == []


def test_a_line_is_written_when_the_access_logger_is_on(
    stderr: FakeStderr, access_logger: logging.Logger
) -> None:
    access_logger.setLevel(logging.INFO)
    observer = RequestObserver(None, AccessLog("json"))
    observer.observe(*observed(), "/v1/orders", 201, 0.002)
    observer.flush()
    [line] = stderr.lines
    fields = json.loads(line)
    assert (fields["request_id"], fields["account_id"], fields["key_id"]) == (
        "req_obs",
        "acct_obs",
        "key_obs",
    )
    assert (fields["route"], fields["method"], fields["status"]) == ("/v1/orders", "POST", 201)
    assert fields["message"] == "POST /v1/orders 201 2.00ms"


def test_a_request_without_a_caller_is_logged_with_empty_ids(
    stderr: FakeStderr, access_logger: logging.Logger
) -> None:
    access_logger.setLevel(logging.DEBUG)
    observer = RequestObserver(None, AccessLog("json"))
    observer.observe({"method": "GET"}, RequestContext("req_anon"), "x", 404, 0)
    observer.flush()
    fields = json.loads(stderr.lines[0])
    assert (fields["request_id"], fields["account_id"], fields["key_id"]) == (
        "req_anon",
        None,
        None,
    )


def test_the_level_is_followed_as_it_changes(
    stderr: FakeStderr, access_logger: logging.Logger
) -> None:
    observer = RequestObserver(None, AccessLog("json"))
    for level, expected in [(logging.INFO, 1), (logging.ERROR, 1), (logging.INFO, 2)]:
        access_logger.setLevel(level)
        observer.observe(*observed(), "/v1/orders", 201, 0.001)
        observer.flush()
        assert len(stderr.lines) == expected


@pytest.mark.parametrize("seconds", [0.0, 0.00001, 0.000126, 0.0077, 1.5, 12.3456, 999.999])
@pytest.mark.parametrize("account_id", [None, "acct_X1y2"])
def test_the_template_line_is_what_orjson_writes(seconds: float, account_id: str | None) -> None:
    """Known methods and id-shaped values take a string template; it must be orjson's bytes."""
    log = AccessLog("json")
    now = 1_795_266_000.25
    entry = Request("req_abc012", account_id, "key_k1", "/v1/orders", "POST", 201, seconds)
    duration_ms = round(seconds * 1000, 2)
    expected = orjson.dumps(
        {
            "time": log._time(now, True),
            "level": "info",
            "logger": "commerce_api.access",
            "message": f"POST /v1/orders 201 {duration_ms:.2f}ms",
            "request_id": "req_abc012",
            "account_id": account_id,
            "key_id": "key_k1",
            "route": "/v1/orders",
            "method": "POST",
            "status": 201,
            "duration_ms": duration_ms,
        }
    ).decode()
    assert log._line(now, entry.answered(now)) == expected
    # An unusual method or value takes orjson itself.
    odd = dataclasses.replace(entry, key_id='key_"quoted"', method="BREW")
    assert orjson.loads(log._line(now, odd.answered(now)))["key_id"] == 'key_"quoted"'


@settings(max_examples=300, deadline=None)
@given(seconds=st.floats(min_value=0, max_value=100_000, allow_nan=False))
def test_a_json_lines_duration_is_written_as_the_json_formatter_writes_it(seconds: float) -> None:
    """The duration's two forms (the message's ``%.2f`` and the field's shortest form) come
    from one conversion; both must be what the JsonFormatter writes, for any duration."""
    request = Request("req_1", "acct_1", "key_1", "/v1/products", "GET", 200, seconds)
    log = AccessLog("json")
    now = time.time()
    line = log._line(now, request.answered(now))
    expected = JsonFormatter().format(request.log_record())
    assert json.loads(line)["message"] == json.loads(expected)["message"]
    assert line.rsplit('"duration_ms":', 1)[1] == expected.rsplit('"duration_ms":', 1)[1]
