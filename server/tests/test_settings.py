"""Settings: the COMMERCE_* environment variables of the operator contract."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from commerce_api.settings import DEFAULT_RETRY_SCHEDULE, Settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No COMMERCE_* variable of the developer's shell leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("COMMERCE_"):
            monkeypatch.delenv(name)


def load() -> Settings:
    return Settings(_env_file=None)


def test_defaults_follow_the_contract_table() -> None:
    settings = load()
    assert settings.database_url == "sqlite:///./commerce.db"
    assert settings.environment == "sandbox"
    assert settings.redis_url is None
    assert settings.rate_limit_development == 1000
    assert settings.rate_limit_production == 10000
    assert settings.rate_limit_window_seconds == 3600
    assert settings.webhook_retry_schedule == (5, 300, 1800, 7200, 18000, 36000, 36000)
    assert DEFAULT_RETRY_SCHEDULE == (5, 300, 1800, 7200, 18000, 36000, 36000)
    assert settings.allow_private_webhook_urls is False
    assert settings.webhook_timeout_seconds == 10
    assert settings.currency == "USD"


def test_environment_variables_override_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMERCE_DATABASE_URL", "postgresql://u:p@db:5432/commerce")
    monkeypatch.setenv("COMMERCE_ENVIRONMENT", "production")
    monkeypatch.setenv("COMMERCE_REDIS_URL", "redis://cache:6379/0")
    monkeypatch.setenv("COMMERCE_RATE_LIMIT_DEVELOPMENT", "7")
    monkeypatch.setenv("COMMERCE_RATE_LIMIT_PRODUCTION", "70")
    monkeypatch.setenv("COMMERCE_RATE_LIMIT_WINDOW_SECONDS", "60")
    monkeypatch.setenv("COMMERCE_WEBHOOK_RETRY_SCHEDULE", "1,2,3")
    monkeypatch.setenv("COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS", "true")
    monkeypatch.setenv("COMMERCE_WEBHOOK_TIMEOUT_SECONDS", "2.5")
    settings = load()
    assert settings.database_url == "postgresql://u:p@db:5432/commerce"
    assert settings.environment == "production"
    assert settings.redis_url == "redis://cache:6379/0"
    assert settings.rate_limit_development == 7
    assert settings.rate_limit_production == 70
    assert settings.rate_limit_window_seconds == 60
    assert settings.webhook_retry_schedule == (1, 2, 3)
    assert settings.allow_private_webhook_urls is True
    assert settings.webhook_timeout_seconds == 2.5


def test_variable_names_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("commerce_environment", "production")
    assert load().environment == "production"


def test_env_file_is_read_and_real_variables_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "COMMERCE_RATE_LIMIT_DEVELOPMENT=11\nCOMMERCE_ENVIRONMENT=production\n", encoding="utf-8"
    )
    monkeypatch.setenv("COMMERCE_ENVIRONMENT", "sandbox")
    settings = Settings(_env_file=env_file)
    assert settings.rate_limit_development == 11
    assert settings.environment == "sandbox"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("5,300", (5, 300)),
        ("5", (5,)),
        (" 5 , 300 ,1800 ", (5, 300, 1800)),
        ("0,10", (0, 10)),
    ],
)
def test_retry_schedule_parses_comma_separated_seconds(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: tuple[int, ...]
) -> None:
    monkeypatch.setenv("COMMERCE_WEBHOOK_RETRY_SCHEDULE", raw)
    assert load().webhook_retry_schedule == expected


@pytest.mark.parametrize("raw", ["garbage", "5,abc", "", " , ", "5,-1", "1.5,2", "[5, 300]"])
def test_retry_schedule_rejects_garbage(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("COMMERCE_WEBHOOK_RETRY_SCHEDULE", raw)
    with pytest.raises(ValidationError) as info:
        load()
    assert "webhook_retry_schedule" in str(info.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("COMMERCE_ENVIRONMENT", "staging"),
        ("COMMERCE_RATE_LIMIT_DEVELOPMENT", "0"),
        ("COMMERCE_RATE_LIMIT_PRODUCTION", "-5"),
        ("COMMERCE_RATE_LIMIT_WINDOW_SECONDS", "soon"),
        ("COMMERCE_WEBHOOK_TIMEOUT_SECONDS", "0"),
        ("COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS", "perhaps"),
        ("COMMERCE_CURRENCY", "usd"),
        ("COMMERCE_HTTP_HEADER_TIMEOUT_SECONDS", "61"),  # granian's header timeout tops at 60 s
        ("COMMERCE_HTTP_KEEP_ALIVE_SECONDS", "-1"),
        ("COMMERCE_HTTP_MAX_REQUESTS_PER_CLIENT", "0"),
        ("COMMERCE_HTTP_MAX_HEADER_BYTES", "100"),
        ("COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", "0"),
        ("COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", "-3"),
        ("COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", "2.5"),
        ("COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", "ten"),
    ],
)
def test_invalid_values_are_rejected(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        load()


def test_attempts_in_flight_per_endpoint_default_to_10_and_may_be_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load().webhook_max_in_flight_per_endpoint == 10
    monkeypatch.setenv("COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", "3")
    assert load().webhook_max_in_flight_per_endpoint == 3


def test_private_webhook_urls_are_refused_by_default_in_the_sandbox_too() -> None:
    """Opt-in only: a sandbox offered to outside integrators must not reach the operator's
    network (it would be a port scanner with an oracle)."""
    assert Settings(_env_file=None, environment="sandbox").allow_private_webhook_urls is False


def test_private_webhook_urls_refused_by_default_in_production(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMMERCE_ENVIRONMENT", "production")
    assert load().allow_private_webhook_urls is False


@pytest.mark.parametrize(
    ("environment", "raw", "expected"),
    [
        ("sandbox", "false", False),
        ("sandbox", "0", False),
        ("production", "true", True),
        ("production", "1", True),
        ("production", "false", False),
        ("sandbox", "true", True),
    ],
)
def test_explicit_private_url_setting_wins(
    monkeypatch: pytest.MonkeyPatch, environment: str, raw: str, expected: bool
) -> None:
    monkeypatch.setenv("COMMERCE_ENVIRONMENT", environment)
    monkeypatch.setenv("COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS", raw)
    assert load().allow_private_webhook_urls is expected


def test_rate_limit_for_each_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMERCE_RATE_LIMIT_DEVELOPMENT", "3")
    monkeypatch.setenv("COMMERCE_RATE_LIMIT_PRODUCTION", "30")
    settings = load()
    assert settings.rate_limit_for("development") == 3
    assert settings.rate_limit_for("production") == 30


def test_settings_are_frozen() -> None:
    settings = load()
    with pytest.raises(ValidationError):
        settings.environment = "production"  # type: ignore[misc]


def test_serves_http_limits_have_their_defaults() -> None:
    settings = load()
    assert settings.http_header_timeout_seconds == 10
    assert settings.http_body_timeout_seconds == 30
    assert settings.http_keep_alive_seconds == 5
    assert settings.http_max_connections == 10_000
    assert settings.http_max_requests_per_client == 64
    assert settings.http_max_header_bytes == 64 * 1024
    assert settings.trusted_proxies == ()


def test_trusted_proxies_are_comma_separated_addresses_or_networks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMMERCE_TRUSTED_PROXIES", " 127.0.0.1, ::1,10.0.0.0/8 ,")
    assert load().trusted_proxies == ("127.0.0.1", "::1", "10.0.0.0/8")
    monkeypatch.setenv("COMMERCE_TRUSTED_PROXIES", "*")
    assert load().trusted_proxies == ("*",)
    monkeypatch.setenv("COMMERCE_TRUSTED_PROXIES", "")
    assert load().trusted_proxies == ()


@pytest.mark.parametrize("raw", ["nginx", "127.0.0.1,proxy.internal", "10.0.0.0/33", "*,10.0.0.1"])
def test_trusted_proxies_that_are_not_addresses_are_refused(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("COMMERCE_TRUSTED_PROXIES", raw)
    with pytest.raises(ValidationError) as info:
        load()
    assert "trusted_proxies" in str(info.value)
