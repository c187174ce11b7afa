"""Every problem of a request is named (``error.problems``, issue 45), on every backend: several
bad fields give one problem each, in our own words, with ``details`` still naming the first;
and every list filter with a fixed set of values refuses any other with a 400 naming it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from commerce_api.app.factory import create_app
from tests import factories
from tests.helpers import bearer
from tests.http.test_error_contract import VALID_PRODUCT, assert_error

PYDANTIC_WORDS = ("Input should", "String should", "List should", "Value error", "Field required")


def _problems(response: httpx.Response) -> list[dict[str, str]]:
    problems: list[dict[str, str]] = response.json()["error"]["problems"]
    for problem in problems:
        assert not any(words in problem["message"] for words in PYDANTIC_WORDS), problem
    return problems


async def test_an_order_with_three_bad_fields_names_all_three(
    client: httpx.AsyncClient, client_key: str
) -> None:
    address = {**factories.ADDRESS, "country": "us"}
    body = factories.order_body(("prod_x", 0), customer_id="", shipping_address=address)
    response = await client.post("/v1/orders", json=body, headers=bearer(client_key))
    error = assert_error(response, 400, "invalid_request", "customer_id")
    problems = _problems(response)
    assert [p["parameter"] for p in problems] == [
        "customer_id",
        "items[0].quantity",
        "shipping_address.country",
    ]
    assert {p["reason"] for p in problems} == {"validation_failed"}
    assert error["message"].startswith("The request has 3 problems: ")
    assert all(p["message"] in error["message"] for p in problems)
    assert "more problem" not in error["message"]


async def test_a_product_with_three_bad_fields_names_all_three_and_writes_nothing(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    body = {**VALID_PRODUCT, "name": "", "price": 19.999, "colour": "red"}
    response = await client.post("/v1/products", json=body, headers=bearer(admin_key))
    assert_error(response, 400, "invalid_request", "name")
    assert [(p["parameter"], p["message"]) for p in _problems(response)] == [
        ("name", "Invalid value for `name`: must not be empty."),
        ("price", "Invalid value for `price`: must have at most two decimal places."),
        ("colour", "Unknown parameter `colour`."),
    ]
    listed = await client.get("/v1/products", headers=bearer(admin_key))
    assert listed.json()["pagination"]["total"] == 0


async def test_every_unknown_query_parameter_is_named(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get("/v1/orders?limt=5&stauts=pending", headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", "limt")
    assert [p["parameter"] for p in _problems(response)] == ["limt", "stauts"]


async def test_one_bad_parameter_is_one_problem_the_same_as_details(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get("/v1/orders?limit=0", headers=bearer(client_key))
    error = assert_error(response, 400, "invalid_request", "limit")
    assert _problems(response) == [
        {"parameter": "limit", "reason": "validation_failed", "message": error["message"]}
    ]


async def test_a_timestamp_in_a_body_is_not_told_about_query_strings(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.post(
        "/v1/webhook_endpoints/we_unknown/recover",
        json={"since": "2026-11-21T08:12:41 01:00"},
        headers=bearer(client_key),
    )
    error = assert_error(response, 400, "invalid_request", "since")
    assert "RFC 3339" in error["message"]
    assert "query" not in error["message"]
    assert "%2B" not in error["message"]
    in_query = await client.get(
        "/v1/orders?created_gte=2026-11-21T08:12:41 01:00", headers=bearer(client_key)
    )
    assert "%2B" in assert_error(in_query, 400, "invalid_request", "created_gte")["message"]


# --- filters with a fixed set of values ---------------------------------------------------------


def _enum_filters() -> list[tuple[str, str]]:
    """(path, parameter) of every GET's query parameter whose values the document lists: read
    from the OpenAPI document, so a filter added later is checked too."""
    document: dict[str, Any] = create_app().openapi()
    found = []
    for path, operations in document["paths"].items():
        for parameter in operations.get("get", {}).get("parameters", []):
            if parameter["in"] != "query":
                continue
            schema = parameter["schema"]
            variants = [schema, *schema.get("anyOf", [])]
            if any("enum" in variant for variant in variants):
                found.append((path, parameter["name"]))
    return sorted(found)


ENUM_FILTERS = _enum_filters()


def test_the_list_filters_with_fixed_values_are_the_ones_expected() -> None:
    assert ENUM_FILTERS == [
        ("/v1/audit_events", "action"),
        ("/v1/events", "type"),
        ("/v1/orders", "status"),
        ("/v1/products", "sort"),
    ]


@pytest.mark.parametrize(("path", "name"), ENUM_FILTERS)
async def test_an_unknown_filter_value_is_a_400_naming_the_filter(
    client: httpx.AsyncClient, admin_key: str, client_key: str, path: str, name: str
) -> None:
    key = admin_key if path == "/v1/audit_events" else client_key
    response = await client.get(path, params={name: "bogus"}, headers=bearer(key))
    error = assert_error(response, 400, "invalid_request", name, reason="validation_failed")
    assert "must be one of `" in error["message"]
    assert [p["parameter"] for p in _problems(response)] == [name]
