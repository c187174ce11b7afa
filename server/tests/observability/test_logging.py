"""Log formatting and redaction (``commerce_api.observability.logging``)."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from commerce_api.observability.logging import (
    JsonFormatter,
    RedactingFilter,
    TextFormatter,
    logging_config,
    redact,
    resolved_format,
)
from commerce_api.settings import Settings

KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc0123abcd"
SANDBOX_KEY = "sk_sandbox_Zx81kLmNoPqRsTuVwXyZ0123456789ab"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw+/="
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


@pytest.mark.parametrize("secret", [KEY, SANDBOX_KEY, SECRET, SIGNATURE])
def test_every_kind_of_secret_is_redacted_wherever_it_sits_in_a_text(secret: str) -> None:
    for text in (secret, f"Bearer {secret}", f'{{"a": "{secret}"}}', f"x={secret}; more"):
        cleaned = redact(text)
        assert secret not in cleaned
        assert "[REDACTED]" in cleaned


def test_redaction_keeps_the_kind_of_secret_and_leaves_other_text_alone() -> None:
    assert redact(f"key {KEY} and {SECRET}") == "key sk_live_[REDACTED] and whsec_[REDACTED]"
    assert redact(f"signature: v1,abc {SIGNATURE}") == "signature: v1,abc v1,[REDACTED]"
    ordinary = "GET /v1/products/{id} 200 0.81ms key_abc acct_def req_ghi"
    assert redact(ordinary) == ordinary
    assert redact("sk_live_") == "sk_live_[REDACTED]"  # even a bare or truncated key


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    entry = logging.LogRecord("commerce_api.test", logging.INFO, __file__, 1, message, args, None)
    for name, value in extra.items():
        setattr(entry, name, value)
    return entry


def test_the_filter_redacts_the_message_its_arguments_and_extra_fields() -> None:
    entry = record(
        "auth failed for %s",
        KEY,
        header=f"Bearer {SANDBOX_KEY}",
        secrets=[SECRET],
        signature=SIGNATURE,
        status=401,
    )
    assert RedactingFilter().filter(entry)
    line = JsonFormatter().format(entry)
    for secret in (KEY, SANDBOX_KEY, SECRET, SIGNATURE):
        assert secret not in line
    fields = json.loads(line)
    assert fields["message"] == "auth failed for sk_live_[REDACTED]"
    assert fields["header"] == "Bearer sk_sandbox_[REDACTED]"
    assert fields["status"] == 401  # numbers stay numbers


def test_the_filter_redacts_tracebacks() -> None:
    try:
        raise ValueError(f"bad key {KEY}")
    except ValueError:
        entry = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "failed", None, exc_info=sys.exc_info()
        )
    RedactingFilter().filter(entry)
    line = JsonFormatter().format(entry)
    assert KEY not in line
    assert "ValueError: bad key sk_live_[REDACTED]" in json.loads(line)["exception"]


def test_json_lines_carry_time_level_logger_message_and_the_extra_fields() -> None:
    entry = record("webhook delivery", event_id="evt_1", status_code=200, outcome="succeeded")
    fields = json.loads(JsonFormatter().format(entry))
    assert fields["level"] == "info"
    assert fields["logger"] == "commerce_api.test"
    assert fields["message"] == "webhook delivery"
    assert fields["time"].endswith("Z")
    assert (fields["event_id"], fields["status_code"], fields["outcome"]) == (
        "evt_1",
        200,
        "succeeded",
    )


def test_text_lines_are_readable_with_the_fields_at_the_end() -> None:
    line = TextFormatter().format(record("GET %s 200", "/v1/products", request_id="req_1"))
    assert "INFO" in line
    assert line.endswith("commerce_api.test: GET /v1/products 200 request_id=req_1")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_format_is_text_on_a_terminal_and_json_otherwise() -> None:
    assert resolved_format(settings(), _Terminal()) == "text"
    assert resolved_format(settings(), io.StringIO()) == "json"
    assert resolved_format(settings(log_format="json"), _Terminal()) == "json"
    assert resolved_format(settings(log_format="TEXT"), io.StringIO()) == "text"


def test_invalid_log_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        settings(log_format="xml")
    with pytest.raises(ValueError):
        settings(log_level="loud")
    with pytest.raises(ValueError):
        settings(metrics="maybe")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    uvicorn = {name: logging.getLogger(name) for name in ("uvicorn", "uvicorn.error")}
    saved_uvicorn = {name: (lg.handlers[:], lg.propagate, lg.level) for name, lg in uvicorn.items()}
    try:
        yield
    finally:
        root.handlers[:], root.level = saved
        for name, lg in uvicorn.items():
            lg.handlers[:], lg.propagate, lg.level = saved_uvicorn[name]


@pytest.mark.usefixtures("restore_logging")
def test_the_configuration_sends_every_logger_through_one_redacting_json_handler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logging.config.dictConfig(logging_config(settings(log_format="json", log_level="warning")))
    logging.getLogger("uvicorn.error").warning("client sent %s", KEY)
    logging.getLogger("commerce_api.webhooks").warning("signed %s", SIGNATURE)
    logging.getLogger("commerce_api.access").info("not at this level")
    lines = capsys.readouterr().err.strip().splitlines()
    assert [json.loads(line)["message"] for line in lines] == [
        "client sent sk_live_[REDACTED]",
        "signed v1,[REDACTED]",
    ]
