"""The dispatcher: claims due deliveries from the outbox, POSTs them signed, records the
outcome, and schedules retries (what an outcome means, and when to retry, is ``policy.py``;
how one delivery is signed and POSTed, ``sender.py``; how outcomes are written, ``recording.py``).

Any number of dispatchers may run against one database (inside ``serve`` processes, or alone as
``commerce-api worker``); they coordinate only through their claims on delivery rows (see
``claims.claim_due``), so one event is never delivered to one endpoint by two of them at
once, and one endpoint never has more than ``COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT``
attempts in flight from all of them together (a backlog reaches a small receiver a few POSTs at
a time). A dispatcher that dies leaves claims that lapse, and its deliveries become due again: a
crash delays a delivery but never loses it. A dispatcher claims only what it starts at once, so
an unfinished claim stands for an attempt that was cut off: the history records it as
interrupted (when the claim is taken over, or given back by a dispatcher that stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.engine import Row

from commerce_api.core.timestamps import utcnow
from commerce_api.observability.metrics import DELIVERY_OUTCOMES, deliveries_outcome
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database, Executor
from commerce_api.storage.faults import log_failure
from commerce_api.storage.group_commit import GroupCommit
from commerce_api.webhooks.policy import judge_attempt
from commerce_api.webhooks.recording import Finished, record_outcomes
from commerce_api.webhooks.repository import claim_ends, claims
from commerce_api.webhooks.sender import Sender, event_body

logger = logging.getLogger("commerce_api.webhooks")

# Attempts in flight per dispatcher. A dispatcher claims only what it can start at once, so a
# claim stands for an attempt in progress (see claims.claim_due).
# Most of an attempt to a receiver answering in a millisecond is spent waiting for the claim
# and the outcome's commit, which many attempts share: the more in flight, the larger the
# claims and the batches of outcomes, and the fewer statements per delivery. 400 and claims of
# 100 drained 4,100/s on SQLite against 3,300/s with 200 and 50 (one worker draining a
# backlog on a 2-core machine); PostgreSQL was at ~4,200/s either way.
CONCURRENCY = 400
# Claims are made CLAIM_BATCH at a time, at least (or when nothing is in flight): every claim is
# a write transaction, and one per finished attempt would double the dispatcher's commits.
CLAIM_BATCH = 100
# At most this many attempts in flight for one account: another account's delivery always
# finds CLAIM_BATCH free slots, whatever the first one's endpoints do (slow, failing, many).
ACCOUNT_SHARE = CONCURRENCY - CLAIM_BATCH
# After a claim that found less than it asked for, the next waits at least this long.
CLAIM_INTERVAL_SECONDS = 0.02
# On shutdown, attempts in flight get this long to finish before they are abandoned (their
# deliveries are released and become due again: a receiver may then see one twice, as
# at-least-once delivery allows).
STOP_GRACE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Claim:
    """A claimed delivery with its event and endpoint as the claim read them (None only if
    they vanished meanwhile: then the claim lapses and the delivery is due again)."""

    delivery: claims.Claimed
    event: Row[Any] | None
    endpoint: Row[Any] | None


class Dispatcher:
    def __init__(self, settings: Settings, db: Database, secret_box: SecretBox) -> None:
        self.settings = settings
        self.db = db
        self.secret_box = secret_box
        self.token = secrets.token_hex(16)  # this dispatcher's name on its claims
        timeout = settings.webhook_timeout_seconds
        # A claim outlives the slowest possible attempt by a wide margin.
        self.lease = timedelta(seconds=3 * timeout + 30)
        self._sender = Sender(settings, secret_box, max_idle_per_destination=CONCURRENCY)
        self._stopping = asyncio.Event()
        self._busy: Counter[str] = Counter()  # attempts in flight per account
        # Finished attempts are recorded in batches: one transaction and one commit for all
        # the attempts that finished meanwhile, not one each (group_commit.py).
        self._records: GroupCommit[Finished, bool] = GroupCommit(db, self._record_batch)

    async def run(self) -> None:
        """Deliver until :meth:`stop`: keep up to ``CONCURRENCY`` attempts in flight, claiming
        more as they finish (a slow receiver holds one slot, not the others). On the way out,
        attempts in flight finish (or, if this task is cancelled, are cut off) and whatever is
        still claimed is given back, recorded as interrupted."""
        logger.info("webhook dispatcher started")
        in_flight: set[asyncio.Task[None]] = set()
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            while not self._stopping.is_set():
                free = CONCURRENCY - len(in_flight)
                worth_it = free >= CLAIM_BATCH or not in_flight
                claimed = await self._claim_safely(free) if worth_it else []
                for row in claimed:
                    task = asyncio.create_task(self._attempt(row))
                    in_flight.add(task)
                    task.add_done_callback(in_flight.discard)
                if worth_it and len(claimed) == free:
                    continue  # every free slot filled: more may be due
                # Less than asked for (none due, or every slot busy, or the accounts with due
                # deliveries at their share, or their endpoints at their cap): claim again once
                # attempts have finished (they free slots, or their account's share, or their
                # endpoint's) — at once if a claim's worth finished
                # together (their outcomes are recorded in batches), else after a claim
                # interval, so that a claim is not one transaction per finished attempt — or
                # after the poll interval.
                finished, _ = await asyncio.wait(
                    {*in_flight, stopping},
                    timeout=self.settings.webhook_poll_seconds,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if (
                    in_flight
                    and len(finished - {stopping}) < CLAIM_BATCH
                    and not self._stopping.is_set()
                ):
                    await asyncio.sleep(CLAIM_INTERVAL_SECONDS)
        finally:
            stopping.cancel()
            try:
                if in_flight:
                    await asyncio.wait(in_flight)  # a cancellation of run() lands here
            finally:
                for task in in_flight:
                    task.cancel()
                await asyncio.gather(*in_flight, return_exceptions=True)
                await self._records.close()
                await self._release()
                await self._sender.aclose()
                logger.info("webhook dispatcher stopped")

    def stop(self) -> None:
        """Stop claiming; :meth:`run` returns once the attempts in flight are done."""
        self._stopping.set()

    async def run_once(self) -> int:
        """Claim what one dispatcher may attempt at once, attempt it all, and wait; returns how
        many were attempted."""
        claimed = await self._claim(CONCURRENCY)
        await asyncio.gather(*(self._attempt(row) for row in claimed))
        return len(claimed)

    async def _claim(self, limit: int) -> list[Claim]:
        """Claim due deliveries, with what attempting them needs (their events and endpoints,
        read in the claim's transaction): a write batch (``Database.write_batch``), whose
        statements run inline on SQLite."""
        now = utcnow()
        async with self.db.write_batch() as conn:
            claimed = await claims.claim_due(
                conn,
                now=now,
                until=now + self.lease,
                token=self.token,
                limit=limit,
                per_endpoint=self.settings.webhook_max_in_flight_per_endpoint,
                per_account=ACCOUNT_SHARE,
                busy=self._busy,
                batch=CLAIM_BATCH,
            )
            events, endpoint_rows = await claims.claimed_rows(conn, claimed)
        for row in claimed:
            self._busy[row.account_id] += 1
        return [
            Claim(row, events.get(row.event_id), endpoint_rows.get(row.endpoint_id))
            for row in claimed
        ]

    async def _claim_safely(self, limit: int) -> list[Claim]:
        try:
            return await self._claim(limit)
        except Exception as exc:
            log_failure(logger, exc, "webhook dispatcher could not claim deliveries; retrying")
            return []

    async def _release(self) -> None:
        with contextlib.suppress(Exception):
            async with self.db.write() as conn:
                await claim_ends.release_claims(conn, self.token, utcnow())

    async def _attempt(self, claim: Claim) -> None:
        delivery = claim.delivery
        event_id, endpoint_id = delivery.event_id, delivery.endpoint_id
        try:
            await self._attempt_one(claim)
        except Exception as exc:
            # The claim lapses and the delivery is retried; nothing is lost.
            log_failure(logger, exc, "delivery of %s to %s failed", event_id, endpoint_id)
        finally:
            self._busy[delivery.account_id] -= 1
            if not self._busy[delivery.account_id]:
                del self._busy[delivery.account_id]

    async def _attempt_one(self, claim: Claim) -> None:
        """One attempt; the delivery's attempts so far come with the claim, which pins them."""
        event_id, endpoint_id = claim.delivery.event_id, claim.delivery.endpoint_id
        attempts_before = claim.delivery.attempts
        event, endpoint = claim.event, claim.endpoint
        assert event is not None
        assert endpoint is not None
        if endpoint.deleted_at is not None:
            await self._finish(event_id, endpoint_id, {"status": "failed", "next_attempt_at": None})
            DELIVERY_OUTCOMES["failed"].inc()
            logger.info("dropped delivery of %s to deleted %s", event_id, endpoint_id)
            return
        if not endpoint.enabled:  # disabled since the candidates were read: it waits, unattempted
            await self._finish(event_id, endpoint_id, {})
            return

        body = event_body(event)
        attempted_at = utcnow()
        started = time.perf_counter()
        status_code, error = await self._sender.traced_post(
            endpoint, event, body, attempted_at, attempts_before
        )
        duration_ms = round((time.perf_counter() - started) * 1000)
        outcome = judge_attempt(
            status_code=status_code,
            attempts_before=attempts_before,
            schedule=self.settings.webhook_retry_schedule,
            now=utcnow(),
        )
        finished = Finished(
            event_id,
            endpoint_id,
            outcome,
            attempted_at,
            status_code,
            duration_ms,
            error,
        )
        if not await self._records.submit(finished):
            return  # our claim lapsed and another dispatcher owns the delivery now
        result = deliveries_outcome(outcome.delivery_status)
        DELIVERY_OUTCOMES[result].inc()
        logger.info(
            "webhook delivery",
            extra={
                "event_id": event_id,
                "endpoint_id": endpoint_id,
                "attempt": attempts_before + 1,
                "status_code": status_code,
                "outcome": result,
                "error": error,
                "duration_ms": duration_ms,
            },
        )

    async def _record_batch(self, conn: Executor, batch: list[Finished]) -> list[bool]:
        """Record finished attempts in one transaction (``recording.record_outcomes``); per
        attempt, whether its claim still held."""
        return await record_outcomes(
            conn,
            batch,
            token=self.token,
            now=utcnow(),
            disable_after=timedelta(seconds=self.settings.webhook_disable_after_seconds),
        )

    async def _finish(self, event_id: str, endpoint_id: str, values: dict[str, Any]) -> None:
        async with self.db.write() as conn:
            await claim_ends.finish_deliveries(
                conn,
                [(event_id, endpoint_id)],
                self.token,
                {**values, "updated_at": utcnow()},
                attempted=False,
            )


async def stop_dispatcher(
    dispatcher: Dispatcher, running: asyncio.Task[None], grace: float = STOP_GRACE_SECONDS
) -> None:
    """Stop ``dispatcher`` (whose :meth:`Dispatcher.run` is ``running``) within about ``grace``
    seconds: attempts in flight may finish until then, and are cancelled after. Either way its
    claims are released before this returns."""
    dispatcher.stop()
    done, _ = await asyncio.wait({running}, timeout=grace)
    if not done:
        logger.warning("webhook attempts still in flight after %.0f s; abandoning them", grace)
        running.cancel()
    # Waits for run()'s clean-up (the release), whether it stopped or was cancelled.
    await asyncio.gather(running, return_exceptions=True)
