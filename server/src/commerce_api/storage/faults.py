"""Logging a failure by what it is: a known database fault (a wait that ran out, SQLite's file
locked by another process, a database that cannot be reached) is expected during an outage and
says all there is to say in one warning line; anything else is a bug to look into, logged with
its traceback."""

from __future__ import annotations

import logging
from typing import Any

from commerce_api.storage.deadlines import causes, is_database_timeout, is_database_unavailable


def known_fault(exc: BaseException) -> str | None:
    """What a known database fault is, in a few words (None: not one)."""
    if is_database_timeout(exc):
        return "database wait timed out"
    if is_database_unavailable(exc):
        return "database unavailable"
    return None


def log_failure(logger: logging.Logger, exc: BaseException, message: str, *args: Any) -> None:
    """Log ``message % args`` for ``exc``: one warning line without a traceback for a known
    database fault (``… : database wait timed out (OperationalError)``), else an error with the
    traceback."""
    fault = known_fault(exc)
    if fault is None:
        logger.error(message, *args, exc_info=exc)
        return
    innermost = causes(exc)[-1]
    logger.warning(f"{message}: %s (%s)", *args, fault, type(innermost).__name__)
