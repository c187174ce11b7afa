"""Recording finished attempts: each delivery's new state, the attempt in the history, and the
verdict on its endpoint's health (healthy, failing, or disabled: ``policy``), for a batch of
attempts in one transaction (the dispatcher's group commit)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from commerce_api.core.ids import new_id
from commerce_api.storage.executor import Executor
from commerce_api.webhooks.policy import (
    GONE_REASON,
    AttemptOutcome,
    disable_reason,
    endpoint_verdicts,
)
from commerce_api.webhooks.repository import attempts, claim_ends, endpoints

logger = logging.getLogger("commerce_api.webhooks")


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished attempt, to be recorded: the delivery's new state, the attempt for the
    history, and the verdict on the endpoint's health."""

    event_id: str
    endpoint_id: str
    outcome: AttemptOutcome
    attempted_at: datetime
    status_code: int | None
    duration_ms: int
    error: str | None


async def record_outcomes(
    conn: Executor,
    batch: list[Finished],
    *,
    token: str,
    now: datetime,
    disable_after: timedelta,
) -> list[bool]:
    """Record finished attempts in one transaction; per attempt, whether its claim still
    held (if not, another dispatcher owns the delivery now and nothing of it is written).

    A fixed number of statements, whatever the batch's size: one update per distinct
    outcome (status and retry time: one for all the successes), one insert of the history,
    and per endpoint the verdict of its last attempt in the batch (a 410 anywhere in it
    disables the endpoint, as it would have one attempt at a time: see
    ``policy.endpoint_verdicts``).

    Lock order: the deliveries first (each claimed by this dispatcher alone), then the
    endpoints in id order — the same in every batch of every dispatcher, and disabling an
    endpoint touches no delivery — so two transactions never wait on each other in a cycle.
    """
    alike: dict[tuple[str, datetime | None], list[tuple[str, str]]] = {}
    for done in batch:
        outcome = (done.outcome.delivery_status, done.outcome.next_attempt_at)
        alike.setdefault(outcome, []).append((done.event_id, done.endpoint_id))
    held: set[tuple[str, str]] = set()
    for (status, next_attempt_at), keys in alike.items():
        values = {"status": status, "next_attempt_at": next_attempt_at, "updated_at": now}
        held |= await claim_ends.finish_deliveries(conn, keys, token, values, attempted=True)
    kept = [(done.event_id, done.endpoint_id) in held for done in batch]
    recorded = [done for done, ok in zip(batch, kept, strict=True) if ok]
    history = [
        {
            "id": new_id("att"),
            "event_id": done.event_id,
            "endpoint_id": done.endpoint_id,
            "attempted_at": done.attempted_at,
            "status_code": done.status_code,
            "duration_ms": done.duration_ms,
            "error": done.error,
        }
        for done in recorded
    ]
    await attempts.insert_attempts(conn, history)
    for verdict in endpoint_verdicts((done.endpoint_id, done.outcome) for done in recorded):
        await _update_endpoint_health(conn, verdict.endpoint_id, verdict.last, now, disable_after)
        if verdict.gone_before:
            await endpoints.disable_endpoint(conn, verdict.endpoint_id, GONE_REASON)
    return kept


async def _update_endpoint_health(
    conn: Executor,
    endpoint_id: str,
    outcome: AttemptOutcome,
    now: datetime,
    disable_after: timedelta,
) -> None:
    """Record the attempt's verdict on the endpoint's row (see :func:`record_outcomes`)."""
    if outcome.succeeded:
        await endpoints.mark_healthy(conn, endpoint_id)
        return
    failing_since = await endpoints.mark_failing(conn, endpoint_id, now)
    reason = disable_reason(
        gone=outcome.gone,
        failing_since=failing_since,
        now=now,
        disable_after=disable_after,
    )
    if reason is not None:
        await endpoints.disable_endpoint(conn, endpoint_id, reason)
        logger.warning("disabled webhook endpoint %s: %s", endpoint_id, reason)
