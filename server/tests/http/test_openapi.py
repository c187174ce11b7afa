"""The OpenAPI document at ``/v1/openapi.json``: it is truthful, and it is a good document.

Part one runs schemathesis over every documented operation, in-process (ASGI, no network), on
both backends, with an admin key and with a client key, and every built-in check on: no 5xx,
only documented statuses, bodies and headers that match the schema, the right content type,
auth enforced, invalid input rejected and valid input accepted.

Part two checks properties of the document itself (version, security, error envelope, no 422,
``X-Request-Id``; for generators, ``format: date-time`` on every timestamp and a ``webhooks``
section with every event's payload) and that ``/docs`` works offline (same-origin assets only).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import httpx
import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode
from schemathesis.python import asgi as schemathesis_asgi
from sqlalchemy import select

from commerce_api.app.factory import create_app
from commerce_api.catalog import service as catalog
from commerce_api.catalog.schemas import ProductCreate
from commerce_api.core.errors import REASONS
from commerce_api.http.openapi import BEARER, OPENAPI_URL
from commerce_api.orders.domain import EVENT_FOR_STATUS
from commerce_api.storage.db import Database
from commerce_api.storage.tables import events as events_table
from commerce_api.webhooks.schemas import EVENT_TYPES
from commerce_api.webhooks.sender import event_body
from tests.conftest import KeyFactory, make_settings
from tests.factories import place_ok
from tests.helpers import bearer

# The document does not depend on the database: build it once, offline, to parametrize tests.
DOCUMENT: dict[str, Any] = create_app(make_settings("sqlite:///unused.db")).openapi()
MAX_UNITS = make_settings("sqlite:///unused.db").order_max_units
HTTP_METHODS = frozenset({"get", "put", "post", "patch", "delete", "head", "options", "trace"})
OPERATIONS: list[tuple[str, str]] = [
    (method.upper(), path)
    for path, item in DOCUMENT["paths"].items()
    for method in item
    if method in HTTP_METHODS
]
RESPONSES: list[tuple[str, str, str]] = [
    (method, path, status)
    for method, path in OPERATIONS
    for status in DOCUMENT["paths"][path][method.lower()]["responses"]
]
ERROR_ENVELOPE_REF = "#/components/schemas/ErrorResponse"

# Bounded and reproducible: the same examples on every run, at most this many per operation
# (positive, negative and real-id cases together; each sent with an admin or a client key).
MAX_EXAMPLES = 50
FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)

SEED_PRODUCTS = [
    ProductCreate(name="Fluent Python", description="2nd edition.", price=52.99, category="books"),
    ProductCreate(name="Refactoring", price=47.5, category="books", inventory_count=3),
    ProductCreate(name="USB-C Hub", description="7-in-1.", price=49.99, category="electronics"),
    ProductCreate(name="Wireless Mouse", price=29, category="electronics", inventory_count=100),
    ProductCreate(name="Green Tea", description="Sencha, 100 g.", price=12, category="grocery"),
]


@dataclass(frozen=True, slots=True)
class Seeded:
    database_url: str
    product_ids: list[str]
    keys: dict[str, str]  # role -> secret


@dataclass(frozen=True, slots=True)
class FuzzTarget:
    schema: Any  # schemathesis.BaseSchema (untyped for mypy)
    product_ids: list[str]
    keys: dict[str, str]


@pytest.fixture
async def seeded(database_url: str, db: Database, make_key: KeyFactory) -> Seeded:
    async with db.write() as conn:
        ids = [(await catalog.create_product(conn, None, p))["id"] for p in SEED_PRODUCTS]
    return Seeded(
        database_url=database_url,
        product_ids=ids,
        keys={"admin": await make_key("admin"), "client": await make_key()},
    )


@pytest.fixture
def fuzz_target(seeded: Seeded) -> Iterator[FuzzTarget]:
    """A fresh app on the seeded database, with the schema schemathesis loaded from it.

    schemathesis runs ASGI apps in one event-loop thread of its own and starts the app's
    lifespan there (once per app), so the app's database engine lives in that loop; it is
    stopped (engine disposed) at teardown.
    """
    app = create_app(make_settings(seeded.database_url))
    try:
        schema = schemathesis.openapi.from_asgi(OPENAPI_URL, app)
        yield FuzzTarget(schema=schema, product_ids=seeded.product_ids, keys=seeded.keys)
    finally:
        schemathesis_asgi.shutdown_lifespans()


def _case_strategy(operation: Any, product_ids: list[str]) -> st.SearchStrategy[Any]:
    strategies = [
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    ]
    if "{id}" in operation.path:
        # schemathesis cannot guess ids: also send the real ones.
        strategies.append(
            st.sampled_from(product_ids).flatmap(
                lambda product_id: operation.as_strategy(
                    GenerationMode.POSITIVE, path_parameters={"id": product_id}
                )
            )
        )
    return st.one_of(strategies)


def _undocumentable_rules(case: Any) -> list[Any]:
    """Checks to skip for a case that breaks a rule JSON Schema cannot state: the operator's
    cap on an order's units in all (``COMMERCE_ORDER_MAX_UNITS``) is a setting (the per-line
    cap is the schema's ``maximum``). Lines for one product are merged, so their sum is bounded
    by the per-line cap too; with the default caps (equal) that sum is over the order's cap
    whenever it is over the line's.
    """
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("items"), list):
        lines = [item for item in body["items"] if isinstance(item, dict)]
        quantities = [q for item in lines if isinstance(q := item.get("quantity"), int | float)]
        if sum(quantities) > MAX_UNITS:
            return [schemathesis.checks.positive_data_acceptance]
    return []


def _judged_on_a_header_we_replace(case: Any) -> bool:
    """A negative case whose headers were the intended flaw (e.g. no Authorization): we send
    a real key instead, so whether the server "rejects invalid data" cannot be judged on it."""
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.NEGATIVE:
        return False
    negative = {location for location in meta.components if meta.is_negative_at(location)}
    return ParameterLocation.HEADER in negative and negative <= {
        ParameterLocation.HEADER,
        ParameterLocation.QUERY,
    }


def _call_and_validate(case: Any, key: str) -> Any:
    """Send one case in-process with every built-in check on, plus our own invariants."""
    positive = case.meta is not None and case.meta.generation.mode == GenerationMode.POSITIVE
    if positive and case.headers and "Idempotency-Key" in case.headers:
        # Generated keys repeat across different requests, which is rightly a 422; a real
        # client uses a fresh key per request.
        case.headers["Idempotency-Key"] = uuid.uuid4().hex
    excluded = _undocumentable_rules(case)
    if _judged_on_a_header_we_replace(case):
        excluded.append(schemathesis.checks.negative_data_rejection)
    response = case.call_and_validate(headers=bearer(key), excluded_checks=excluded)
    request_ids = response.headers.get("x-request-id", [])
    assert len(request_ids) == 1, "every response carries exactly one X-Request-Id"
    assert request_ids[0].startswith("req_")
    return response


OPERATION_IDS = [f"{m} {p}" for m, p in OPERATIONS]


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=OPERATION_IDS)
def test_operation_conforms_to_the_document(
    fuzz_target: FuzzTarget, method: str, path: str
) -> None:
    operation = fuzz_target.schema[path][method]

    @FUZZ_SETTINGS
    @given(
        case=_case_strategy(operation, fuzz_target.product_ids),
        role=st.sampled_from(sorted(fuzz_target.keys)),
    )
    def run(case: Any, role: str) -> None:
        _call_and_validate(case, fuzz_target.keys[role])

    run()


@pytest.mark.parametrize("role", ["admin", "client"])
def test_real_products_conform_to_the_document(fuzz_target: FuzzTarget, role: str) -> None:
    """Example-based, so that success responses are certainly validated, whatever the fuzzer."""
    key = fuzz_target.keys[role]
    products = fuzz_target.schema["/v1/products/{id}"]
    listing = fuzz_target.schema["/v1/products"]

    response = _call_and_validate(listing["GET"].Case(query={"limit": 2}), key)
    assert response.status_code == 200
    assert response.json()["pagination"]["total"] == len(SEED_PRODUCTS)
    response = _call_and_validate(listing["GET"].Case(query={"category": "books"}), key)
    assert [p["category"] for p in response.json()["data"]] == ["books", "books"]

    for product_id in fuzz_target.product_ids:
        response = _call_and_validate(products["GET"].Case(path_parameters={"id": product_id}), key)
        assert response.status_code == 200
        assert response.json()["id"] == product_id

    product_id = fuzz_target.product_ids[0]
    update = products["PATCH"].Case(path_parameters={"id": product_id}, body={"price": 9.99})
    response = _call_and_validate(update, key)
    assert response.status_code == (200 if role == "admin" else 403)
    create = listing["POST"].Case(body={"name": "Kite", "price": 24.99, "category": "toys"})
    response = _call_and_validate(create, key)
    assert response.status_code == (201 if role == "admin" else 403)
    delete = products["DELETE"].Case(path_parameters={"id": product_id})
    response = _call_and_validate(delete, key)
    assert response.status_code == (204 if role == "admin" else 403)


# --- the document itself -----------------------------------------------------------------------


@pytest.fixture
async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get(OPENAPI_URL)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    return body


def test_the_served_document_is_the_one_under_test(document: dict[str, Any]) -> None:
    assert document == DOCUMENT


def test_the_document_points_only_at_what_the_service_serves() -> None:
    """An API user reading /docs may not have this repository: no file of it is named, and
    no link leaves the service (the examples of URLs a receiver may have are not links)."""
    text = json.dumps(DOCUMENT)
    assert not re.findall(r"[\w/.-]+\.md\b", text)
    assert not re.findall(r"\]\((?:https?:)?//", text)  # no Markdown link off the service


def test_document_is_openapi_3_1() -> None:
    assert re.fullmatch(r"3\.1\.\d+", DOCUMENT["openapi"])


def test_every_operation_is_documented() -> None:
    assert set(OPERATIONS) >= {
        ("GET", "/v1/products"),
        ("POST", "/v1/products"),
        ("GET", "/v1/products/{id}"),
        ("PATCH", "/v1/products/{id}"),
        ("DELETE", "/v1/products/{id}"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
    }
    assert all(path.startswith("/v1/") or path in {"/healthz", "/readyz"} for _, path in OPERATIONS)


def test_bearer_security_scheme_is_declared() -> None:
    scheme = DOCUMENT["components"]["securitySchemes"][BEARER]
    assert scheme["type"] == "http"
    assert scheme["scheme"].lower() == "bearer"


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=OPERATION_IDS)
def test_every_v1_operation_requires_the_bearer_key(method: str, path: str) -> None:
    operation = DOCUMENT["paths"][path][method.lower()]
    security = operation.get("security", DOCUMENT.get("security"))
    if path.startswith("/v1/"):
        assert security == [{BEARER: []}]
    else:
        assert not security, "health checks are public"


def _error_params() -> list[Any]:
    params: list[Any] = []
    for method, path, status in RESPONSES:
        if int(status) < 400:
            continue
        params.append(pytest.param(method, path, status, id=f"{method} {path} {status}"))
    return params


@pytest.mark.parametrize(("method", "path", "status"), _error_params())
def test_every_error_response_uses_the_error_envelope(method: str, path: str, status: str) -> None:
    response = DOCUMENT["paths"][path][method.lower()]["responses"][status]
    assert response["content"]["application/json"]["schema"] == {"$ref": ERROR_ENVELOPE_REF}


def test_error_envelope_schema_matches_the_spec() -> None:
    schemas = DOCUMENT["components"]["schemas"]
    envelope = schemas["ErrorResponse"]
    assert envelope["required"] == ["error"]
    detail_ref = envelope["properties"]["error"]["$ref"]
    detail = schemas[detail_ref.rsplit("/", 1)[1]]
    assert sorted(detail["required"]) == ["code", "details", "message", "problems", "reason"]
    assert detail["properties"]["reason"]["enum"] == list(REASONS)
    problems = detail["properties"]["problems"]
    assert problems["type"] == "array"
    problem = schemas[problems["items"]["$ref"].rsplit("/", 1)[1]]
    assert sorted(problem["required"]) == ["message", "parameter", "reason"]
    assert problem["properties"]["reason"]["enum"] == list(REASONS)
    assert set(detail["properties"]["code"]["enum"]) == {
        "invalid_request",
        "unauthorized",
        "not_found",
        "rate_limited",
        "server_error",
    }
    for field in ("message", "details"):
        assert detail["properties"][field]["type"] == "string"


def test_only_idempotent_posts_document_422() -> None:
    """The service answers 400 for validation; FastAPI's default 422 must not leak in. A 422
    means an Idempotency-Key reused with another request, so only POSTs document it."""
    offenders = [(m, p) for m, p, status in RESPONSES if status == "422" and m != "POST"]
    assert offenders == []
    posts = [p for m, p in OPERATIONS if m == "POST"]
    assert posts
    for path in posts:
        assert "422" in DOCUMENT["paths"][path]["post"]["responses"]
    schemas = DOCUMENT.get("components", {}).get("schemas", {})
    assert "HTTPValidationError" not in schemas
    assert "ValidationError" not in schemas


@pytest.mark.parametrize(
    ("method", "path", "status"), RESPONSES, ids=[" ".join(r) for r in RESPONSES]
)
def test_every_response_documents_x_request_id(method: str, path: str, status: str) -> None:
    response = DOCUMENT["paths"][path][method.lower()]["responses"][status]
    assert "X-Request-Id" in response.get("headers", {})


# --- /docs ----------------------------------------------------------------------------------------


class _References(HTMLParser):
    """Collects every URL an HTML page makes a browser fetch or follow."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in {"src", "href", "action", "data", "poster", "srcset"} and value:
                self.urls.append(value)


ASSET_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


async def test_docs_page_is_html_with_same_origin_assets_only(client: httpx.AsyncClient) -> None:
    response = await client.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert OPENAPI_URL in html

    # No absolute or protocol-relative URL to another host, anywhere in the page.
    external = re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+", html)
    assert [u for u in external if urlsplit(u).hostname not in {None, "testserver"}] == []

    parser = _References()
    parser.feed(html)
    assets = [url for url in parser.urls if url.startswith("/docs/assets/")]
    assert len(assets) >= 2, parser.urls  # at least the script and the stylesheet
    assert all(urlsplit(url).netloc == "" for url in parser.urls), parser.urls
    for url in assets:
        asset = await client.get(url)
        assert asset.status_code == 200, url
        suffix = url[url.rfind(".") :]
        assert asset.headers["content-type"].split(";")[0] == ASSET_TYPES[suffix], url
        assert asset.content, url


# --- methods the document does not list --------------------------------------------------------

ALL_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
PATH_EXAMPLES = {"/v1/products/{id}": "/v1/products/prod_8fJ2kLmN0pQrStUvWxYz1234"}


def _documented_methods(path: str) -> set[str]:
    return {method.upper() for method in DOCUMENT["paths"][path] if method in HTTP_METHODS}


def _undocumented_methods() -> list[Any]:
    return [
        pytest.param(method, path, id=f"{method} {path}")
        for path in DOCUMENT["paths"]
        for method in ALL_METHODS
        if method not in _documented_methods(path)
    ]


@pytest.mark.parametrize(("method", "path"), _undocumented_methods())
async def test_undocumented_method_is_405_with_an_allow_header(
    client: httpx.AsyncClient, admin_key: str, method: str, path: str
) -> None:
    """405 with the envelope, and `Allow` names every method of the path (not just one route's:
    FastAPI has one route per method and Starlette's own `Allow` names only the first)."""
    url = PATH_EXAMPLES.get(path, path)
    response = await client.request(method, url, headers=bearer(admin_key))
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "invalid_request"
    assert response.headers["x-request-id"].startswith("req_")
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert allowed == _documented_methods(path)


# --- for generators: timestamps and webhooks ---------------------------------------------------

TIMESTAMP_NAME = re.compile(r".+_at|created_gte|created_lt|since")


def _named_schemas(node: object, where: str = "$") -> Iterator[tuple[str, str, Any]]:
    """Every property and parameter in the document: (where, name, schema)."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            for name, schema in node["properties"].items():
                yield f"{where}.properties", name, schema
        if isinstance(node.get("name"), str) and node.get("in") in {"query", "path", "header"}:
            yield where, node["name"], node.get("schema", {})
        for key, value in node.items():
            yield from _named_schemas(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _named_schemas(value, f"{where}[{i}]")


def _is_date_time(schema: dict[str, Any]) -> bool:
    values = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    return bool(values) and all(
        s.get("type") == "string" and s.get("format") == "date-time" for s in values
    )


def test_every_timestamp_is_a_date_time() -> None:
    """Generators type `format: date-time` as a timestamp (openapi-typescript, openapi-generator,
    datamodel-code-generator), a bare string as any text."""
    timestamps = [
        (where, name, schema)
        for where, name, schema in _named_schemas(DOCUMENT)
        if TIMESTAMP_NAME.fullmatch(name)
    ]
    names = {name for _, name, _ in timestamps}
    assert names >= {
        "created_at",
        "updated_at",
        "fulfilled_at",
        "canceled_at",
        "attempted_at",
        "next_attempt_at",
        "created_gte",
        "created_lt",
    }
    offenders = [
        f"{where}: {name}" for where, name, schema in timestamps if not _is_date_time(schema)
    ]
    assert offenders == []


def _payload_schema(event_type: str) -> tuple[str, dict[str, Any]]:
    body = DOCUMENT["webhooks"][event_type]["post"]["requestBody"]
    assert body["required"] is True
    ref: str = body["content"]["application/json"]["schema"]["$ref"]
    return ref, DOCUMENT["components"]["schemas"][ref.rsplit("/", 1)[1]]


def test_webhooks_describe_every_event_type() -> None:
    assert set(EVENT_TYPES) == set(EVENT_FOR_STATUS.values())
    assert sorted(DOCUMENT.get("webhooks", {})) == sorted(EVENT_TYPES)


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_each_webhook_documents_its_payload_and_signature_headers(event_type: str) -> None:
    operations = DOCUMENT["webhooks"][event_type]
    assert list(operations) == ["post"]
    operation = operations["post"]
    _, payload = _payload_schema(event_type)
    assert sorted(payload["required"]) == ["created_at", "data", "id", "type"]
    assert payload["properties"]["type"]["const"] == event_type
    assert payload["properties"]["data"]["$ref"] == "#/components/schemas/Order"
    assert _is_date_time(payload["properties"]["created_at"])
    headers = {p["name"]: p for p in operation["parameters"] if p["in"] == "header"}
    assert sorted(headers) == ["webhook-id", "webhook-signature", "webhook-timestamp"]
    assert all(header["required"] for header in headers.values())
    assert set(operation["responses"]) == {"200"}, "the receiver's answer: any 2xx, no 422"
    assert "security" not in operation


async def test_delivered_bodies_match_their_webhook_schema(
    client: httpx.AsyncClient, db: Database, admin_key: str, client_key: str, product_in_stock: str
) -> None:
    """The bodies the dispatcher sends (``event_body``) validate against the document, formats
    included (with jsonschema_rs, schemathesis's validator), and name no field it leaves out."""
    for action, key in (("fulfill", admin_key), ("cancel", client_key)):
        order = await place_ok(client, client_key, (product_in_stock, 1))
        response = await client.post(f"/v1/orders/{order['id']}/{action}", headers=bearer(key))
        assert response.status_code == 200, response.text
    async with db.read() as conn:
        rows = (await conn.execute(select(events_table))).all()
    assert sorted(row.type for row in rows) == sorted([*EVENT_TYPES, "order.created"])

    schemas = DOCUMENT["components"]["schemas"]
    for row in rows:
        body = json.loads(event_body(row))
        ref, payload = _payload_schema(row.type)
        validator = jsonschema_rs.validator_for(
            {"$ref": ref, "components": DOCUMENT["components"]}, validate_formats=True
        )
        errors = [error.message for error in validator.iter_errors(body)]
        assert errors == [], (row.type, errors)
        assert set(body) == set(payload["properties"])
        assert set(body["data"]) == set(schemas["Order"]["properties"])


def test_every_operation_but_the_catalogue_reads_documents_the_publishable_keys_403() -> None:
    catalogue_reads = {("GET", "/v1/products"), ("GET", "/v1/products/{id}")}
    catalogue_reads |= {("GET", "/v1/categories")}
    for method, path in OPERATIONS:
        if not path.startswith("/v1/"):
            continue
        responses = DOCUMENT["paths"][path][method.lower()]["responses"]
        if (method, path) in catalogue_reads:
            assert "403" not in responses, (method, path)
        else:
            assert "403" in responses, (method, path)
            assert "publishable key" in responses["403"]["description"], (method, path)
    assert "pk_sandbox_" in DOCUMENT["components"]["securitySchemes"][BEARER]["description"]
