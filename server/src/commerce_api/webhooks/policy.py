"""The delivery policy, as plain functions: what an attempt's answer means for its delivery
(done, retried when, or failed) and for its endpoint (healthy, failing, or disabled).

The dispatcher asks these and records the answers; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from commerce_api.core.timestamps import format_timestamp

GONE = 410  # the receiver says the endpoint is gone for good
GONE_REASON = "The receiver answered 410 Gone."


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """What one attempt means for its delivery and its endpoint."""

    delivery_status: str  # pending (retry later), succeeded, failed
    next_attempt_at: datetime | None
    succeeded: bool
    gone: bool  # the receiver answered 410: disable the endpoint


def is_success(status_code: int) -> bool:
    """Whether the receiver's answer delivers the event (any 2xx)."""
    return 200 <= status_code < 300


def retry_at(*, attempts_before: int, schedule: Sequence[int], now: datetime) -> datetime | None:
    """The backoff: when to retry after the attempt that followed ``attempts_before`` others —
    ``schedule[attempts_before]`` seconds from ``now`` — or None once the schedule has run out."""
    if attempts_before < len(schedule):
        return now + timedelta(seconds=schedule[attempts_before])
    return None


def judge_attempt(
    *, status_code: int | None, attempts_before: int, schedule: Sequence[int], now: datetime
) -> AttemptOutcome:
    """The retry policy: 2xx succeeds; 410 fails and disables the endpoint; anything else is
    retried after ``schedule[n]`` seconds until the schedule runs out."""
    if status_code is not None and is_success(status_code):
        return AttemptOutcome("succeeded", None, succeeded=True, gone=False)
    if status_code == GONE:
        return AttemptOutcome("failed", None, succeeded=False, gone=True)
    retry = retry_at(attempts_before=attempts_before, schedule=schedule, now=now)
    if retry is not None:
        return AttemptOutcome("pending", retry, succeeded=False, gone=False)
    return AttemptOutcome("failed", None, succeeded=False, gone=False)


def disable_reason(
    *, gone: bool, failing_since: datetime, now: datetime, disable_after: timedelta
) -> str | None:
    """The endpoint-health policy, after a failed attempt: why to disable the endpoint, or None.

    A 410 disables at once. Otherwise only sustained failure does: every attempt has failed
    since ``failing_since`` (the first failure after the last success) and that is at least
    ``disable_after`` ago. A burst of failures, however many, never disables an endpoint.
    """
    if gone:
        return GONE_REASON
    if now - failing_since >= disable_after:
        return f"Every delivery attempt has failed since {format_timestamp(failing_since)}."
    return None


@dataclass(frozen=True, slots=True)
class EndpointVerdict:
    """What a batch of attempts means for one endpoint: the outcome of its last attempt, and
    whether an earlier one was a 410 (which disables the endpoint all the same)."""

    endpoint_id: str
    last: AttemptOutcome
    gone_before: bool


def endpoint_verdicts(outcomes: Iterable[tuple[str, AttemptOutcome]]) -> list[EndpointVerdict]:
    """Per endpoint, in id order, the verdict of attempts ``(endpoint_id, outcome)`` listed in
    the order they finished: the same as judging them one at a time."""
    last: dict[str, AttemptOutcome] = {}
    gone: set[str] = set()
    for endpoint_id, outcome in outcomes:
        last[endpoint_id] = outcome
        if outcome.gone:
            gone.add(endpoint_id)
    return [
        EndpointVerdict(
            endpoint_id, last[endpoint_id], endpoint_id in gone and not last[endpoint_id].gone
        )
        for endpoint_id in sorted(last)
    ]
