"""Expected faults logged as one warning line each, without a traceback (issue 44): the webhook
dispatcher meeting SQLite's file locked by another process, or a PostgreSQL it cannot reach;
a traceback only for an error nobody knew."""

from __future__ import annotations

import asyncio
import logging

import pytest

from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database
from commerce_api.storage.deadlines import database_deadlines
from commerce_api.storage.faults import log_failure
from commerce_api.webhooks.dispatcher import Dispatcher, stop_dispatcher
from tests.conftest import make_settings
from tests.storage.test_sqlite_lock_wait import write_lock_held_by_another_process

UNREACHABLE_POSTGRES = "postgresql://postgres@127.0.0.1:1/commerce"


async def _dispatch_for_a_while(database_url: str, db_url: str | None = None) -> None:
    settings = make_settings(
        database_url,
        webhook_poll_seconds=0.05,
        database_lock_timeout_seconds=0.2,
        database_transaction_timeout_seconds=0.5,
        database_connect_timeout_seconds=0.5,
    )
    assert settings.secret_key is not None
    db = Database(db_url or database_url, deadlines=database_deadlines(settings))
    try:
        dispatcher = Dispatcher(settings, db, SecretBox(settings.secret_key))
        running = asyncio.create_task(dispatcher.run())
        await asyncio.sleep(1.5)
        await stop_dispatcher(dispatcher, running, grace=0.5)
    finally:
        await db.dispose()


def _claim_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "could not claim deliveries" in r.getMessage()]


async def test_a_locked_sqlite_file_is_a_warning_line_without_a_traceback(
    sqlite_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = sqlite_database_url.removeprefix("sqlite:///")
    with caplog.at_level(logging.INFO), write_lock_held_by_another_process(path):
        await _dispatch_for_a_while(sqlite_database_url)
    failures = _claim_failures(caplog)
    assert failures, [r.getMessage() for r in caplog.records]
    for record in failures:
        assert record.levelno == logging.WARNING, record.getMessage()
        assert record.exc_info is None
        assert "database wait timed out" in record.getMessage()
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


async def test_an_unreachable_postgresql_is_a_warning_line_without_a_traceback(
    postgresql_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        await _dispatch_for_a_while(postgresql_database_url, UNREACHABLE_POSTGRES)
    failures = _claim_failures(caplog)
    assert failures, [r.getMessage() for r in caplog.records]
    for record in failures:
        assert record.levelno == logging.WARNING, record.getMessage()
        assert record.exc_info is None
        assert "database unavailable" in record.getMessage()


def test_an_unknown_error_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("commerce_api.test")
    try:
        raise RuntimeError("a bug")
    except RuntimeError as exc:
        with caplog.at_level(logging.INFO, logger="commerce_api.test"):
            log_failure(logger, exc, "delivery of %s failed", "evt_1")
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.getMessage() == "delivery of evt_1 failed"
