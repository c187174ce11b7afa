from __future__ import annotations

from typing import Any

import httpx
import pytest
from client_testing import BASE_URL, LIVE_KEY, SANDBOX_KEY, MockAPI, product_json

import commerce_client


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COMMERCE_API_KEY", "COMMERCE_ENVIRONMENT", "COMMERCE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def make(**kwargs: Any) -> commerce_client.Client:
    return commerce_client.Client(**kwargs)


def test_environment_selects_the_base_url() -> None:
    with make(api_key=LIVE_KEY, environment="production") as client:
        assert client.base_url == "https://api.commerce.example/v1"
    with make(api_key=SANDBOX_KEY, environment="sandbox") as client:
        assert client.base_url == "https://sandbox.api.commerce.example/v1"


def test_environment_is_inferred_from_the_key_when_omitted() -> None:
    with make(api_key=LIVE_KEY) as client:
        assert client.environment == "production"
    with make(api_key=SANDBOX_KEY) as client:
        assert client.environment == "sandbox"


def test_settings_come_from_the_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMERCE_API_KEY", SANDBOX_KEY)
    monkeypatch.setenv("COMMERCE_ENVIRONMENT", "sandbox")
    monkeypatch.setenv("COMMERCE_BASE_URL", "http://localhost:8000/v1/")
    with make() as client:
        assert client.api_key == SANDBOX_KEY
        assert client.environment == "sandbox"
        assert client.base_url == "http://localhost:8000/v1"


def test_arguments_win_over_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMERCE_API_KEY", "sk_sandbox_fromenv")
    monkeypatch.setenv("COMMERCE_BASE_URL", "http://env.example/v1")
    with make(api_key=SANDBOX_KEY, base_url=BASE_URL) as client:
        assert client.api_key == SANDBOX_KEY
        assert client.base_url == BASE_URL


def test_unknown_environment_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="'production' or 'sandbox', not 'staging'"):
        make(api_key=SANDBOX_KEY, environment="staging")


def test_unknown_environment_variable_is_a_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMERCE_ENVIRONMENT", "prod")
    with pytest.raises(ValueError, match="not 'prod'"):
        make(api_key=SANDBOX_KEY)


def test_live_key_in_the_sandbox_is_refused_before_any_request() -> None:
    api = MockAPI().reply(json=product_json())
    with pytest.raises(ValueError, match=r"sk_live_….*configured for sandbox"):
        api.client(api_key=LIVE_KEY, environment="sandbox")
    assert api.requests == []


def test_sandbox_key_in_production_is_refused() -> None:
    with pytest.raises(ValueError, match=r"sk_sandbox_….*configured for production"):
        make(api_key=SANDBOX_KEY, environment="production")


def test_mismatch_is_refused_with_a_base_url_too() -> None:
    with pytest.raises(ValueError, match="sandbox key"):
        make(api_key=SANDBOX_KEY, environment="production", base_url=BASE_URL)


@pytest.mark.parametrize(
    ("key", "environment", "message"),
    [
        (
            "pk_live_" + "a" * 32,
            "sandbox",
            r"\(pk_live_…\) is a production key.*Use a pk_sandbox_…",
        ),
        ("pk_sandbox_" + "a" * 32, "production", r"\(pk_sandbox_…\) is a sandbox key.*pk_live_…"),
        (LIVE_KEY, "sandbox", r"\(sk_live_…\) is a production key.*Use a sk_sandbox_… key"),
    ],
)
def test_a_key_for_the_other_environment_names_the_prefix_to_use(
    key: str, environment: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make(api_key=key, environment=environment, base_url=BASE_URL)


def test_the_mismatch_reads_as_the_typescript_client_s() -> None:
    message = (
        "This API key (sk_live_…) is a production key, but the client is configured for sandbox. "
        "Use a sk_sandbox_… key, or environment='production'."
    )
    with pytest.raises(ValueError, match="configured for sandbox") as caught:
        make(api_key=LIVE_KEY, environment="sandbox")
    assert str(caught.value) == message


def test_the_environment_variable_is_checked_against_the_key_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMMERCE_ENVIRONMENT", "sandbox")
    with pytest.raises(ValueError, match="configured for sandbox"):
        make(api_key=LIVE_KEY)


def test_publishable_keys_tell_their_environment() -> None:
    with make(api_key="pk_live_" + "a" * 32) as client:
        assert client.environment == "production"
    with make(api_key="pk_sandbox_" + "a" * 32) as client:
        assert client.base_url == "https://sandbox.api.commerce.example/v1"


def test_base_url_comes_from_the_environment_variable_before_the_environment_s_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMMERCE_BASE_URL", "http://localhost:8000/v1")
    with make(api_key=SANDBOX_KEY, environment="sandbox") as client:
        assert client.base_url == "http://localhost:8000/v1"


@pytest.mark.parametrize("url", ["localhost:8000/v1", "/v1", "ftp://files.example/v1"])
def test_base_url_must_be_an_absolute_http_url(url: str) -> None:
    with pytest.raises(ValueError, match=r"absolute http\(s\) URL"):
        make(api_key=SANDBOX_KEY, base_url=url)


def test_missing_api_key_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="COMMERCE_API_KEY"):
        make(environment="sandbox")


def test_unprefixed_key_needs_an_environment() -> None:
    with pytest.raises(ValueError, match="No environment"):
        make(api_key="opaque")
    with make(api_key="opaque", environment="sandbox") as client:
        assert client.environment == "sandbox"


def test_base_url_must_end_with_the_version() -> None:
    with pytest.raises(ValueError, match="must end with the API version"):
        make(api_key=SANDBOX_KEY, base_url="http://localhost:8000")


@pytest.mark.parametrize("retries", [-1, 1.5, True])
def test_max_retries_must_be_a_non_negative_integer(retries: Any) -> None:
    with pytest.raises(ValueError, match="max_retries"):
        make(api_key=SANDBOX_KEY, max_retries=retries)


def test_repr_never_shows_the_key() -> None:
    with make(api_key=SANDBOX_KEY) as client:
        assert SANDBOX_KEY not in repr(client)


def test_requests_carry_the_key_and_go_to_the_base_url() -> None:
    api = MockAPI().reply(json=product_json())
    with api.client() as client:
        client.products.get("prod_1")
    request = api.last
    assert str(request.url) == f"{BASE_URL}/products/prod_1"
    assert request.headers["authorization"] == f"Bearer {SANDBOX_KEY}"
    assert request.headers["user-agent"].startswith("commerce-client/")


def test_timeout_applies_to_every_request() -> None:
    api = MockAPI().reply(json=product_json())
    with api.client(timeout=4.5) as client:
        client.products.get("prod_1")
    assert api.last.extensions["timeout"] == httpx.Timeout(4.5).as_dict()


def test_default_timeout_is_thirty_seconds() -> None:
    with make(api_key=SANDBOX_KEY) as client:
        assert client.timeout == 30.0


def test_a_caller_supplied_http_client_stays_open() -> None:
    http = httpx.Client()
    with commerce_client.Client(api_key=SANDBOX_KEY, http_client=http):
        pass
    assert not http.is_closed
    http.close()


def test_the_client_closes_its_own_http_client() -> None:
    client = make(api_key=SANDBOX_KEY)
    with client:
        pass
    assert client._http.is_closed


async def test_async_client_is_an_async_context_manager() -> None:
    client = commerce_client.AsyncClient(api_key=SANDBOX_KEY)
    async with client:
        assert client.environment == "sandbox"
    assert client._http.is_closed


async def test_async_client_checks_its_configuration_too() -> None:
    with pytest.raises(ValueError, match="sk_live_"):
        commerce_client.AsyncClient(api_key=LIVE_KEY, environment="sandbox")
