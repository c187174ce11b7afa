from __future__ import annotations

import pytest
from client_testing import MockAPI, product_json

import commerce_client
from commerce_client import (
    APIStatusError,
    AuthenticationError,
    CommerceError,
    ConflictError,
    IdempotencyError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    Problem,
    RateLimitError,
    ServerError,
)


@pytest.mark.parametrize(
    ("status", "code", "error_class"),
    [
        (400, "invalid_request", InvalidRequestError),
        (401, "unauthorized", AuthenticationError),
        (403, "unauthorized", PermissionDeniedError),
        (404, "not_found", NotFoundError),
        (405, "invalid_request", InvalidRequestError),
        (409, "invalid_request", ConflictError),
        (413, "invalid_request", InvalidRequestError),
        (415, "invalid_request", InvalidRequestError),
        (422, "invalid_request", IdempotencyError),
        (429, "rate_limited", RateLimitError),
        (500, "server_error", ServerError),
        (503, "server_error", ServerError),
    ],
)
def test_every_status_maps_to_its_error(
    status: int, code: str, error_class: type[CommerceError], sleeps: list[float]
) -> None:
    api = MockAPI().error(
        status, code, "customer_id", "Say what to do.", headers={"X-Request-Id": "req_abc"}
    )
    with api.client(max_retries=0) as client, pytest.raises(error_class) as caught:
        client.products.get("prod_1")
    error = caught.value
    assert type(error) is error_class
    assert error.status_code == status
    assert error.code == code
    assert error.message == "Say what to do."
    assert error.details == "customer_id"
    assert error.request_id == "req_abc"
    assert error.rate_limit is not None
    assert error.rate_limit.limit == 1000
    assert isinstance(error, APIStatusError)
    assert error.body == {
        "error": {"code": code, "message": "Say what to do.", "details": "customer_id"}
    }


def test_the_error_tree_is_the_documented_one() -> None:
    assert issubclass(APIStatusError, CommerceError)
    for cls in (
        InvalidRequestError,
        AuthenticationError,
        NotFoundError,
        RateLimitError,
        ServerError,
    ):
        assert issubclass(cls, APIStatusError)
    for other in (commerce_client.APIConnectionError, commerce_client.WebhookVerificationError):
        assert issubclass(other, CommerceError)
        assert not issubclass(other, APIStatusError)
    assert issubclass(ConflictError, InvalidRequestError)
    assert issubclass(IdempotencyError, InvalidRequestError)
    assert issubclass(PermissionDeniedError, AuthenticationError)
    assert issubclass(commerce_client.APITimeoutError, commerce_client.APIConnectionError)
    # Reasons refine the classes that existed before them: old ``except`` clauses still catch.
    assert issubclass(commerce_client.ValidationFailedError, InvalidRequestError)
    for cls in (
        commerce_client.InsufficientStockError,
        commerce_client.InvalidTransitionError,
        commerce_client.IdempotencyKeyInUseError,
    ):
        assert issubclass(cls, ConflictError)
    assert issubclass(commerce_client.IdempotencyKeyReusedError, IdempotencyError)
    assert issubclass(commerce_client.QuotaExceededError, RateLimitError)


@pytest.mark.parametrize(
    ("status", "code", "reason", "error_class"),
    [
        (400, "invalid_request", "validation_failed", commerce_client.ValidationFailedError),
        (409, "invalid_request", "insufficient_stock", commerce_client.InsufficientStockError),
        (409, "invalid_request", "invalid_transition", commerce_client.InvalidTransitionError),
        (
            409,
            "invalid_request",
            "idempotency_key_in_use",
            commerce_client.IdempotencyKeyInUseError,
        ),
        (
            422,
            "invalid_request",
            "idempotency_key_reused",
            commerce_client.IdempotencyKeyReusedError,
        ),
        (429, "rate_limited", "quota_exceeded", commerce_client.QuotaExceededError),
        # Reasons without a class of their own: the status's class, with the reason.
        (404, "not_found", "unknown_route", NotFoundError),
        (400, "invalid_request", "malformed_request", InvalidRequestError),
        (403, "unauthorized", "forbidden", PermissionDeniedError),
        # A reason this version does not know.
        (409, "invalid_request", "something_new", ConflictError),
        # A reason whose class does not fit the status is not believed over the status.
        (400, "invalid_request", "insufficient_stock", InvalidRequestError),
    ],
)
def test_the_reason_picks_its_typed_error(
    status: int, code: str, reason: str, error_class: type[CommerceError], sleeps: list[float]
) -> None:
    api = MockAPI().error(status, code, "items[0].quantity", "Why.", reason=reason)
    with api.client(max_retries=0) as client, pytest.raises(error_class) as caught:
        client.products.get("prod_1")
    assert type(caught.value) is error_class
    assert caught.value.reason == reason
    assert caught.value.code == code
    assert f"reason {reason}" in str(caught.value)


def test_an_error_from_before_reasons_has_none(sleeps: list[float]) -> None:
    api = MockAPI().error(409, "invalid_request", "items[0].quantity", "Not enough stock.")
    with api.client(max_retries=0) as client, pytest.raises(ConflictError) as caught:
        client.products.get("prod_1")
    assert type(caught.value) is ConflictError
    assert caught.value.reason is None


def test_every_problem_of_the_request_is_on_the_error(sleeps: list[float]) -> None:
    problems = [
        {"parameter": "customer_id", "reason": "validation_failed", "message": "Missing `a`."},
        {"parameter": "items[0].quantity", "reason": "validation_failed", "message": "At least 1."},
        {"parameter": "colour", "reason": "validation_failed", "message": "Unknown `colour`."},
    ]
    error = {
        "code": "invalid_request",
        "reason": "validation_failed",
        "message": "The request has 3 problems: …",
        "details": "customer_id",
        "problems": [*problems, "not a problem", {"parameter": 5}],
    }
    api = MockAPI().reply(400, {"error": error})
    with api.client(max_retries=0) as client, pytest.raises(InvalidRequestError) as caught:
        client.products.get("prod_1")
    assert caught.value.details == "customer_id"
    assert caught.value.problems == [Problem(**problem) for problem in problems]
    assert all(isinstance(problem, Problem) for problem in caught.value.problems)


def test_an_error_from_before_problems_has_none(sleeps: list[float]) -> None:
    api = MockAPI().error(400, "invalid_request", "customer_id", reason="validation_failed")
    with api.client(max_retries=0) as client, pytest.raises(InvalidRequestError) as caught:
        client.products.get("prod_1")
    assert caught.value.problems == []
    assert CommerceError("no response").problems == []


def test_rate_limit_error_carries_retry_after_and_the_headers() -> None:
    api = MockAPI().error(
        429,
        "rate_limited",
        "X-RateLimit-Limit",
        headers={
            "Retry-After": "3600",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": "1790003600",
        },
    )
    with api.client() as client, pytest.raises(RateLimitError) as caught:
        client.products.list()
    assert caught.value.retry_after == 3600.0
    assert caught.value.rate_limit is not None
    assert caught.value.rate_limit.remaining == 0
    assert caught.value.rate_limit.reset == 1790003600
    assert client.last_rate_limit == caught.value.rate_limit


def test_an_error_without_the_envelope_still_maps_by_status(sleeps: list[float]) -> None:
    api = MockAPI().reply(502, content=b"<html>Bad gateway</html>")
    with api.client(max_retries=0) as client, pytest.raises(ServerError) as caught:
        client.products.get("prod_1")
    assert caught.value.code is None
    assert caught.value.reason is None
    assert caught.value.message == "The API answered 502 Bad Gateway."
    assert caught.value.body == "<html>Bad gateway</html>"  # the text, as it was not JSON


def test_str_of_an_error_names_status_code_details_and_request_id() -> None:
    api = MockAPI().error(404, "not_found", "id", "No product with id `x`.")
    with api.client() as client, pytest.raises(NotFoundError) as caught:
        client.products.get("x")
    text = str(caught.value)
    assert "No product with id `x`." in text
    assert "404" in text
    assert "not_found" in text
    assert "details id" in text
    assert "req_" in text


def test_last_rate_limit_follows_each_response() -> None:
    api = MockAPI().reply(json=product_json(), headers={"X-RateLimit-Remaining": "41"})
    with api.client() as client:
        assert client.last_rate_limit is None
        client.products.get("prod_1")
        assert client.last_rate_limit is not None
        assert client.last_rate_limit.limit == 1000
        assert client.last_rate_limit.remaining == 41
        assert client.last_rate_limit.reset_at.year == 2026


def test_missing_rate_limit_headers_give_none() -> None:
    api = MockAPI().reply(json=product_json(), headers={"X-RateLimit-Limit": "many"})
    with api.client() as client:
        client.products.get("prod_1")
        assert client.last_rate_limit is None


def test_a_success_that_is_not_json_is_an_error() -> None:
    api = MockAPI().reply(200, content=b"not json")
    with api.client() as client, pytest.raises(CommerceError, match="not JSON"):
        client.products.get("prod_1")


async def test_async_errors_map_the_same_way() -> None:
    api = MockAPI().error(401, "unauthorized", "Authorization", headers={"X-Request-Id": "r1"})
    async with api.async_client() as client:
        with pytest.raises(AuthenticationError) as caught:
            await client.orders.get("ord_1")
    assert caught.value.request_id == "r1"
    assert caught.value.details == "Authorization"
