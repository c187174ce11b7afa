"""The error contract of docs/design.md: one test per row of the status table that exists today.

Every error is ``{"error": {"code", "reason", "message", "details", "problems"}}`` with exactly
those keys, its reason one of the table's with the row's status and code, ``problems`` listing
what ``details`` names first (none for a 5xx or a rate limit), and every response carries
``X-Request-Id``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from commerce_api.accounts import service as accounts
from commerce_api.core.errors import REASONS
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests.helpers import bearer

MIB = 1024 * 1024

VALID_PRODUCT: dict[str, object] = {
    "name": "Notebook",
    "description": "A5, dotted",
    "price": 12.5,
    "category": "stationery",
    "inventory_count": 3,
}


def assert_error(
    response: httpx.Response,
    status: int,
    code: str,
    details: str | None = None,
    *,
    reason: str | None = None,
) -> dict[str, str]:
    """Assert the status, the exact envelope (a reason of the table, whose row has this status
    and code) and the request id; return ``error``."""
    assert response.status_code == status, response.text
    assert response.headers.get("x-request-id"), "every response carries X-Request-Id"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "reason", "message", "details", "problems"}, error
    problems = error.pop("problems")
    assert all(isinstance(value, str) for value in error.values()), error
    if code in {"server_error", "rate_limited"}:
        assert problems == [], problems
    else:
        assert problems, "a refusal of the request names at least one problem"
        assert problems[0]["parameter"] == error["details"], problems
        for problem in problems:
            assert set(problem) == {"parameter", "reason", "message"}, problem
            assert problem["reason"] in REASONS, problem
            assert problem["message"], problem
    assert error["code"] == code, error
    assert REASONS.get(error["reason"]) == (status, code), error
    if reason is not None:
        assert error["reason"] == reason, error
    assert error["message"], "the message is never empty"
    if details is not None:
        assert error["details"] == details, error
    return dict(error)


async def create_product(client: httpx.AsyncClient, admin_key: str) -> dict[str, object]:
    response = await client.post("/v1/products", json=VALID_PRODUCT, headers=bearer(admin_key))
    assert response.status_code == 201, response.text
    product: dict[str, object] = response.json()
    return product


# --- 400 invalid_request -----------------------------------------------------------------------


async def test_malformed_json_is_invalid_request(client: httpx.AsyncClient, admin_key: str) -> None:
    response = await client.post(
        "/v1/products",
        content=b'{"name": "Notebook", ',
        headers={**bearer(admin_key), "Content-Type": "application/json"},
    )
    assert_error(response, 400, "invalid_request", "body")


async def test_failed_validation_names_the_parameter(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    body = {**VALID_PRODUCT, "inventory_count": -1}
    response = await client.post("/v1/products", json=body, headers=bearer(admin_key))
    error = assert_error(response, 400, "invalid_request", "inventory_count")
    assert "inventory_count" in error["message"]


async def test_missing_required_field_names_the_parameter(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    body = {key: value for key, value in VALID_PRODUCT.items() if key != "name"}
    response = await client.post("/v1/products", json=body, headers=bearer(admin_key))
    assert_error(response, 400, "invalid_request", "name")


async def test_unknown_body_field_is_rejected(client: httpx.AsyncClient, admin_key: str) -> None:
    body = {**VALID_PRODUCT, "colour": "red"}
    response = await client.post("/v1/products", json=body, headers=bearer(admin_key))
    assert_error(response, 400, "invalid_request", "colour")


async def test_unknown_query_parameter_is_rejected(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get("/v1/products", params={"limt": "5"}, headers=bearer(client_key))
    error = assert_error(response, 400, "invalid_request", "limt")
    assert "limt" in error["message"]


@pytest.mark.parametrize(
    ("name", "value"),
    [("limit", "0"), ("limit", "-5"), ("limit", "abc"), ("limit", "2.5"), ("offset", "-1")],
)
async def test_bad_pagination_value_is_invalid_request(
    client: httpx.AsyncClient, client_key: str, name: str, value: str
) -> None:
    response = await client.get("/v1/products", params={name: value}, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", name)


async def test_failed_admin_create_writes_nothing(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    for body in (
        {**VALID_PRODUCT, "price": 19.999},
        {**VALID_PRODUCT, "unknown": 1},
        {**VALID_PRODUCT, "name": ""},
    ):
        response = await client.post("/v1/products", json=body, headers=bearer(admin_key))
        assert_error(response, 400, "invalid_request")
    listed = await client.get("/v1/products", headers=bearer(admin_key))
    assert listed.status_code == 200
    assert listed.json()["data"] == []
    assert listed.json()["pagination"]["total"] == 0


# --- 401 unauthorized --------------------------------------------------------------------------


def assert_unauthorized(response: httpx.Response) -> dict[str, str]:
    error = assert_error(response, 401, "unauthorized", "Authorization")
    assert response.headers.get("www-authenticate") == "Bearer"
    return error


async def test_missing_authorization_header_is_unauthorized(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/products")
    assert_unauthorized(response)


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", "sk_sandbox_abc", "Token sk_sandbox_abc"],
)
async def test_malformed_authorization_header_is_unauthorized(
    client: httpx.AsyncClient, header: str
) -> None:
    response = await client.get("/v1/products", headers={"Authorization": header})
    assert_unauthorized(response)


async def test_unknown_key_is_unauthorized(client: httpx.AsyncClient) -> None:
    unknown = "sk_sandbox_" + "A" * 32
    response = await client.get("/v1/products", headers=bearer(unknown))
    assert_unauthorized(response)


async def test_key_without_a_known_prefix_is_unauthorized(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/products", headers=bearer("not-a-key"))
    assert_unauthorized(response)


async def test_revoked_key_is_unauthorized(
    client: httpx.AsyncClient, db: Database, settings: Settings
) -> None:
    async with db.write() as conn:
        account_id = await accounts.create_account(conn, "Revoked", "development")
        key = await accounts.create_key(conn, settings.environment, account_id=account_id)
    async with db.write() as conn:
        assert await accounts.revoke_key(conn, key.id)
    response = await client.get("/v1/products", headers=bearer(key.secret))
    assert_unauthorized(response)


async def test_live_key_on_sandbox_instance_is_unauthorized(
    client: httpx.AsyncClient, db: Database
) -> None:
    async with db.write() as conn:
        account_id = await accounts.create_account(conn, "Live", "production")
        key = await accounts.create_key(conn, "production", account_id=account_id)
    assert key.secret.startswith("sk_live_")
    response = await client.get("/v1/products", headers=bearer(key.secret))
    assert_unauthorized(response)


# --- 403 unauthorized (wrong role) -------------------------------------------------------------


async def test_client_key_cannot_create_products(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.post("/v1/products", json=VALID_PRODUCT, headers=bearer(client_key))
    assert_error(response, 403, "unauthorized")
    assert "www-authenticate" not in response.headers


async def test_client_key_cannot_update_products(
    client: httpx.AsyncClient, client_key: str, admin_key: str
) -> None:
    product = await create_product(client, admin_key)
    response = await client.patch(
        f"/v1/products/{product['id']}", json={"name": "Changed"}, headers=bearer(client_key)
    )
    assert_error(response, 403, "unauthorized")
    unchanged = await client.get(f"/v1/products/{product['id']}", headers=bearer(client_key))
    assert unchanged.json()["name"] == VALID_PRODUCT["name"]


async def test_client_key_cannot_delete_products(
    client: httpx.AsyncClient, client_key: str, admin_key: str
) -> None:
    product = await create_product(client, admin_key)
    response = await client.delete(f"/v1/products/{product['id']}", headers=bearer(client_key))
    assert_error(response, 403, "unauthorized")
    still_there = await client.get(f"/v1/products/{product['id']}", headers=bearer(client_key))
    assert still_there.status_code == 200


# --- 404 not_found -----------------------------------------------------------------------------


async def test_unknown_route_is_not_found(client: httpx.AsyncClient, client_key: str) -> None:
    response = await client.get("/v1/nothing-here", headers=bearer(client_key))
    assert_error(response, 404, "not_found")


async def test_unknown_route_without_key_is_not_found_envelope(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/v2/products")
    assert_error(response, 404, "not_found")


async def test_unknown_product_id_is_not_found(client: httpx.AsyncClient, client_key: str) -> None:
    response = await client.get("/v1/products/prod_" + "x" * 24, headers=bearer(client_key))
    assert_error(response, 404, "not_found", "id")


@pytest.mark.parametrize(
    "raw_id", ["%00", "prod_%00", "prod_abc%00def", "..%2F..", "%F0%9F%92%A9", "a" * 300]
)
async def test_malformed_product_id_is_not_found(
    client: httpx.AsyncClient, client_key: str, raw_id: str
) -> None:
    response = await client.get(f"/v1/products/{raw_id}", headers=bearer(client_key))
    assert_error(response, 404, "not_found")


@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
async def test_nul_byte_in_product_id_on_admin_write_is_not_found(
    client: httpx.AsyncClient, admin_key: str, method: str
) -> None:
    # %00 reaches the handler as a NUL character, which PostgreSQL cannot even compare.
    body: dict[str, object] | None = {"name": "x"} if method == "PATCH" else None
    response = await client.request(
        method, "/v1/products/prod_%00abc", headers=bearer(admin_key), json=body
    )
    assert_error(response, 404, "not_found")


@pytest.mark.parametrize("path", ["/v1/products/", "/v1/products/prod_abc/"])
async def test_trailing_slash_is_not_found(
    client: httpx.AsyncClient, client_key: str, path: str
) -> None:
    response = await client.get(path, headers=bearer(client_key))
    assert_error(response, 404, "not_found")


# --- 405 invalid_request -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", "/v1/products"), ("DELETE", "/v1/products"), ("POST", "/v1/products/prod_abc")],
)
async def test_wrong_method_is_method_not_allowed_with_allow_header(
    client: httpx.AsyncClient, admin_key: str, method: str, path: str
) -> None:
    response = await client.request(method, path, headers=bearer(admin_key))
    assert_error(response, 405, "invalid_request", "method")
    assert response.headers.get("allow")
    assert method not in response.headers["allow"]


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("PUT", "/v1/products", {"GET", "POST"}),
        ("POST", "/v1/products/prod_abc", {"GET", "PATCH", "DELETE"}),
    ],
)
async def test_allow_header_lists_every_method_of_the_path(
    client: httpx.AsyncClient, admin_key: str, method: str, path: str, expected: set[str]
) -> None:
    response = await client.request(method, path, headers=bearer(admin_key))
    assert_error(response, 405, "invalid_request", "method")
    allowed = {name.strip() for name in response.headers["allow"].split(",")}
    assert expected <= allowed


# --- 413 invalid_request -----------------------------------------------------------------------


def _oversized_json() -> bytes:
    return b'{"name": "' + b"x" * (MIB + 1) + b'"}'


async def test_body_over_1_mib_with_content_length_is_too_large(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    response = await client.post(
        "/v1/products",
        content=_oversized_json(),
        headers={**bearer(admin_key), "Content-Type": "application/json"},
    )
    assert_error(response, 413, "invalid_request", "body")


async def test_streamed_body_over_1_mib_is_too_large(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    chunk = b"x" * (64 * 1024)

    async def body() -> AsyncIterator[bytes]:
        yield b'{"name": "'
        for _ in range(17):  # 17 * 64 KiB > 1 MiB
            yield chunk
        yield b'"}'

    response = await client.post(
        "/v1/products",
        content=body(),
        headers={**bearer(admin_key), "Content-Type": "application/json"},
    )
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "invalid_request", "body")


async def test_body_of_exactly_1_mib_is_not_too_large(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    prefix = b'{"name": "'
    suffix = b'"}'
    content = prefix + b"x" * (MIB - len(prefix) - len(suffix)) + suffix
    assert len(content) == MIB
    response = await client.post(
        "/v1/products",
        content=content,
        headers={**bearer(admin_key), "Content-Type": "application/json"},
    )
    # Read in full and validated: the name is too long, which is a 400, not a 413.
    assert_error(response, 400, "invalid_request")


async def test_malformed_content_length_is_invalid_request(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    response = await client.post(
        "/v1/products",
        content=b"{}",
        headers={**bearer(admin_key), "Content-Type": "application/json", "Content-Length": "x"},
    )
    assert_error(response, 400, "invalid_request", "Content-Length")


# --- 415 invalid_request -----------------------------------------------------------------------


async def test_text_plain_body_is_unsupported_media_type(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    response = await client.post(
        "/v1/products",
        content=b'{"name": "Notebook"}',
        headers={**bearer(admin_key), "Content-Type": "text/plain"},
    )
    assert_error(response, 415, "invalid_request", "Content-Type")


async def test_form_body_is_unsupported_media_type(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    response = await client.post(
        "/v1/products", data={"name": "Notebook", "price": "1"}, headers=bearer(admin_key)
    )
    assert_error(response, 415, "invalid_request", "Content-Type")


async def test_json_body_without_content_type_is_unsupported_media_type(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    response = await client.post(
        "/v1/products", content=b'{"name": "Notebook"}', headers=bearer(admin_key)
    )
    assert_error(response, 415, "invalid_request", "Content-Type")


# --- 500 server_error --------------------------------------------------------------------------

SECRET_IN_EXCEPTION = "kaboom-do-not-leak-this"


async def _explode() -> None:
    raise RuntimeError(SECRET_IN_EXCEPTION)


async def test_unexpected_error_is_server_error_without_traceback(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    app.add_api_route("/v1/_test_explode", _explode, methods=["GET"])
    response = await client.get("/v1/_test_explode")
    error = assert_error(response, 500, "server_error")
    assert error["details"] == response.headers["x-request-id"]
    assert error["details"].startswith("req_")
    assert "Traceback" not in response.text
    assert SECRET_IN_EXCEPTION not in response.text
    assert "RuntimeError" not in response.text


async def test_request_ids_differ_between_requests(client: httpx.AsyncClient) -> None:
    first = await client.get("/v1/products")
    second = await client.get("/v1/products")
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize("path", ["/docs", "/openapi.json", "/healthz", "/v1/products/prod_x"])
async def test_every_answer_says_nosniff(
    client: httpx.AsyncClient, client_key: str, path: str
) -> None:
    response = await client.get(path, headers=bearer(client_key))
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_swagger_ui_does_not_keep_pasted_keys(client: httpx.AsyncClient) -> None:
    page = (await client.get("/docs")).text
    assert '"persistAuthorization": false' in page


async def test_successful_responses_carry_request_id(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get("/v1/products", headers=bearer(client_key))
    assert response.status_code == 200
    assert response.headers["x-request-id"].startswith("req_")
    assert response.headers["x-content-type-options"] == "nosniff"
