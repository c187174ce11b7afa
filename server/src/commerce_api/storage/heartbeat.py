"""Proof that the connection listening for changes still hears (issue 32 item 3).

A listening connection cut off silently (a partition drops its packets, nothing is closed)
would otherwise look up until TCP gives up on it, minutes later, while the process serves what
it cached: a key revoked meanwhile would still be accepted. So every ``HEARTBEAT_SECONDS`` the
listening connection sends a notification to a channel of its own (``LISTEN`` on it too, on
the same connection: a name no other process listens on) and waits for it to come back. A
notification sent on a connection comes back on it the way every other one does, at the
commit of the statement's transaction, so its arrival proves the link delivers both ways and
the connection receives notifications. When it has not come back within ``PROOF_SECONDS`` of
being sent, ``silent`` is called (the tracker then declares itself down and listens again on a
new connection): a cut is noticed at most ``HEARTBEAT_SECONDS + PROOF_SECONDS`` after it.

The cost: one statement of a few bytes each way per interval per process, and a notification
that only this connection hears. Nothing on the request path.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncpg

logger = logging.getLogger("commerce_api.readpath")

HEARTBEAT_SECONDS = 0.5  # between two proofs
PROOF_SECONDS = 1.0  # a proof not back so long after it was sent: the connection is lost
_SEND = "SELECT pg_notify($1, $2)"


class Heartbeat:
    """Proves, on and on, that ``connection`` hears notifications; calls ``silent`` once (and
    stops) when a proof did not come back in time. :meth:`stop` ends it first."""

    def __init__(self, connection: asyncpg.Connection, silent: Callable[[], None]) -> None:
        self._connection = connection
        self._silent = silent
        self.channel = f"commerce_heartbeat_{secrets.token_hex(8)}"
        self._expected = ""
        self._proof: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()

    @classmethod
    async def start(cls, connection: asyncpg.Connection, silent: Callable[[], None]) -> Heartbeat:
        beat = cls(connection, silent)
        await connection.add_listener(beat.channel, beat._heard)
        beat._task = asyncio.create_task(beat._beating(), name="change-listener-heartbeat")
        return beat

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _heard(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        proof = self._proof
        if proof is not None and payload == self._expected and not proof.done():
            proof.set_result(None)

    async def _beating(self) -> None:
        loop = asyncio.get_running_loop()
        beat = 0
        while not self._connection.is_closed():
            await asyncio.sleep(HEARTBEAT_SECONDS)
            beat += 1
            self._expected = str(beat)
            self._proof = proof = loop.create_future()
            # Sent apart from the wait: on a silent cut the statement is never answered, and
            # the connection is terminated rather than the statement cancelled (a cancel
            # request would need a connection of its own through the same cut).
            sending = asyncio.create_task(self._send(self._expected))
            self._sending.add(sending)
            sending.add_done_callback(self._sending.discard)
            done, _ = await asyncio.wait({proof}, timeout=PROOF_SECONDS)
            if not done:
                if not self._connection.is_closed():
                    logger.warning(
                        "the connection listening for changes did not hear its heartbeat"
                        " within %.1f s; listening again on a new one",
                        PROOF_SECONDS,
                    )
                self._silent()
                return

    async def _send(self, payload: str) -> None:
        # A failure needs no word of its own: the proof does not come back, and that says it.
        with suppress(Exception):
            await self._connection.execute(_SEND, self.channel, payload)
