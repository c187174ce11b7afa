"""The catalogue reads through the fast lane (``commerce_api.app.fastlane``), on both backends.

What it promises, checked here:

- an endpoint runs once per request: an error it raises (a 404, an unexpected failure) is
  answered by the fast lane, with the status, envelope and headers the full stack gives;
- the query parameters it takes are those FastAPI's route takes, with the same values; what
  the route refuses goes to the full stack, which names the problem;
- a parameter left out gets FastAPI's default: a ``default_factory`` is called per request;
- a path is matched by the route's template as Starlette's routing matches it.

``app.fast_lane = None`` sends every request to the full stack, to compare.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, cast

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Query
from starlette.responses import Response
from starlette.routing import Match, Route

from commerce_api.app.fastlane import FastLane
from commerce_api.app.services import Services
from commerce_api.http.declaration import path_pattern
from commerce_api.http.paging import Limit
from commerce_api.http.routing import StrictRoute, json_response, served_first
from commerce_api.readpath.service import ReadPath
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests.conftest import make_settings
from tests.factories import new_products
from tests.helpers import bearer, running_app
from tests.http.test_error_contract import assert_error

# Headers whose value differs from one request to the next.
PER_REQUEST = {"x-request-id", "x-ratelimit-remaining"}


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, rate_limit_development=1_000_000)


class CountingReads:
    """Counts the read path's calls (once per run of the catalogue endpoints) and makes them
    fail on demand."""

    def __init__(self, read_path: ReadPath, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.failure: Exception | None = None
        for name in ("product_body", "page"):
            monkeypatch.setattr(read_path, name, self._counting(getattr(read_path, name)))

    def _counting(self, read: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any) -> Any:
            self.calls += 1
            if self.failure is not None:
                raise self.failure
            return await read(*args)

        return counted


@pytest.fixture
def reads(services: Services, monkeypatch: pytest.MonkeyPatch) -> CountingReads:
    return CountingReads(services.read_path, monkeypatch)


async def full_stack(
    app: FastAPI, request: Callable[[], Awaitable[httpx.Response]]
) -> httpx.Response:
    """The full stack's answer to ``request``: the fast lane is off while it runs."""
    lane = app.fast_lane  # type: ignore[attr-defined]
    app.fast_lane = None  # type: ignore[attr-defined]
    try:
        return await request()
    finally:
        app.fast_lane = lane  # type: ignore[attr-defined]


def assert_same_answer(fast: httpx.Response, full: httpx.Response) -> None:
    """The same status, body and headers (in any order), but for what names the request."""
    assert fast.status_code == full.status_code
    fast_id, full_id = fast.headers["x-request-id"], full.headers["x-request-id"]
    assert fast.content.replace(fast_id.encode(), full_id.encode()) == full.content
    assert sorted(fast.headers.keys()) == sorted(full.headers.keys())
    for name in fast.headers.keys() - PER_REQUEST:
        assert fast.headers[name] == full.headers[name], name


@pytest.mark.parametrize(
    ("path", "failure"),
    [
        ("/v1/products/prod_unknown", None),  # the endpoint's own 404
        ("/v1/products/{id}", RuntimeError("boom")),  # an unexpected failure: a 500
        ("/v1/products", RuntimeError("boom")),
        ("/v1/products?limit=5&category=books", RuntimeError("boom")),
    ],
    ids=["unknown-product", "failure", "list-failure", "filtered-list-failure"],
)
async def test_an_endpoint_runs_once_and_its_error_is_the_full_stacks(
    path: str,
    failure: Exception | None,
    app: FastAPI,
    client: httpx.AsyncClient,
    client_key: str,
    services: Services,
    reads: CountingReads,
) -> None:
    (product_id,) = await new_products(services.db, 5)
    url = path.replace("{id}", product_id)
    reads.failure = failure

    def request() -> Awaitable[httpx.Response]:
        return client.get(url, headers=bearer(client_key))

    fast = await request()
    assert reads.calls == 1, "the endpoint ran more than once"
    full = await full_stack(app, request)
    assert reads.calls == 2
    if failure is None:
        assert_error(fast, 404, "not_found", "id")
    else:
        error = assert_error(fast, 500, "server_error")
        assert error["details"] == fast.headers["x-request-id"]
    assert_same_answer(fast, full)


# Plain forms (each parameter once, percent-encoded values): the fast lane takes exactly
# what the route accepts.
QUERIES = [
    "limit=1",
    "limit=100",
    "limit=101",
    "limit=0",
    "limit=-1",
    "limit=%2B5",
    "limit=5.0",
    "limit=5.5",
    "limit=1e2",
    "limit=%205",
    "limit=5%20",
    "limit=0x10",
    "limit=1_000",
    "limit=%D9%A3",  # an Arabic-Indic three
    "limit=true",
    "limit=",
    "offset=9007199254740991",
    "offset=9007199254740992",
    "offset=00",
    "offset=-0",
    "category=books",
    "category=",
    "category=a%00b",
    "category=%C2%A0books",
    "category=%E2%80%A8",
    f"category={'c' * 100}",
    f"category={'c' * 101}",
    "limit=5&offset=3&category=x",
    "sort=price",
    "sort=-created_at",
    "sort=name",
    "sort=-name",
    "sort=PRICE",
    "sort=",
    "q=widget",
    "q=Widget%20blue",
    "q=%22",
    "q=",
    "q=a%0Ab",
    f"q={'w' * 200}",
    f"q={'w' * 201}",
    "q=widget&sort=-price&category=widgets&limit=2&offset=1",
]


async def test_query_parameters_are_taken_exactly_as_the_route_takes_them(
    app: FastAPI, client: httpx.AsyncClient, client_key: str, services: Services
) -> None:
    await new_products(services.db, 5, 5, 5)
    lane = app.fast_lane  # type: ignore[attr-defined]
    assert isinstance(lane, FastLane)
    (route,) = [r for r in lane.routes if r.template == "/v1/products"]
    for query in QUERIES:

        def request(query: str = query) -> Awaitable[httpx.Response]:
            return client.get(f"/v1/products?{query}", headers=bearer(client_key))

        full = await full_stack(app, request)
        taken = route.query(query.encode()) is not None
        assert taken == (full.status_code == 200), (query, full.text)
        fast = await request()
        assert (fast.status_code, fast.content) == (full.status_code, full.content), query


# --- defaults, with an app of its own ---------------------------------------------------------

stamps = itertools.count()


def next_stamp() -> int:
    return next(stamps)


seen: list[dict[str, Any]] = []
defaults_router = APIRouter(route_class=StrictRoute)


@defaults_router.get("/defaults")
@served_first
async def with_defaults(
    stamp: Annotated[int, Query(default_factory=next_stamp)],
    limit: Limit = 20,
    label: Annotated[str, Query(min_length=1, validate_default=True)] = "all",
    kind: str | None = None,
) -> Response:
    seen.append({"stamp": stamp, "limit": limit, "label": label, "kind": kind})
    return json_response({})


async def test_a_left_out_parameter_gets_fastapis_default_afresh_each_request() -> None:
    app = FastAPI()
    app.include_router(defaults_router)
    lane = FastLane(cast(Services, None), cast(Any, None), defaults_router.routes)
    (route,) = lane.routes

    def lane_arguments(query: bytes) -> dict[str, Any]:
        parsed = route.query(query)
        assert parsed is not None
        shared, fresh = parsed
        return {**shared, **{parameter.name: parameter.default() for parameter in fresh}}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        for query in ["", "limit=5", "kind=x&label=y", "stamp=7"]:
            seen.clear()
            for _ in range(2):
                assert (await http.get(f"/defaults?{query}")).status_code == 200
            expected = [{**arguments, "stamp": None} for arguments in seen]
            given = [lane_arguments(query.encode()) for _ in range(2)]
            assert [{**arguments, "stamp": None} for arguments in given] == expected
            if "stamp" in query:
                assert [arguments["stamp"] for arguments in given] == [7, 7]
            else:  # the factory is called for each request, as FastAPI calls it
                assert given[0]["stamp"] != given[1]["stamp"]
                assert seen[0]["stamp"] != seen[1]["stamp"]


# --- paths --------------------------------------------------------------------------------------

TEMPLATES = ["/v1/products", "/v1/products/{id}", "/v1/orders/{id}/cancel", "/a.b/{x}-{y:str}"]
PATHS = [
    "/v1/products",
    "/v1/products/",
    "/v1/products/prod_1",
    "/v1/products/prod_1/",
    "/v1/products/a/b",
    "/v1/products/x\x00",
    "/v1/products/café",
    "/v1/orders/ord_1/cancel",
    "/v1/orders//cancel",
    "/a.b/1-2",
    "/aXb/1-2",
    "/a.b/1-2-3",
]


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_path_is_matched_as_starlettes_routing_matches_it(template: str) -> None:
    pattern = path_pattern(template)
    route = Route(template, json_response)
    for path in PATHS:
        match, child = route.matches({"type": "http", "path": path, "method": "GET"})
        found = pattern.match(path)
        assert (found is not None) == (match is Match.FULL), path
        if found is not None:
            assert found.groupdict() == child["path_params"], path


@pytest.mark.parametrize("path", ["/v1/products", "/v1/products/{id}", "/v1/products/prod_x"])
async def test_a_storefronts_read_is_answered_alike_on_both_paths(
    path: str,
    database_url: str,
    publishable_key: str,
    db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A publishable key's read from a CORS origin: the fast lane answers it (the endpoint runs
    once) with the status, body and headers the routes give, CORS's included."""
    (product_id,) = await new_products(db, 5)
    url = path.replace("{id}", product_id)
    settings = make_settings(database_url, cors_origins="https://shop.example")
    async with running_app(settings) as (app, http):
        reads = CountingReads(app.state.services.read_path, monkeypatch)

        def request() -> Awaitable[httpx.Response]:
            headers = {**bearer(publishable_key), "Origin": "https://shop.example"}
            return http.get(url, headers=headers)

        fast = await request()
        assert reads.calls == 1
        full = await full_stack(app, request)
        assert reads.calls == 2
    assert fast.headers["access-control-allow-origin"] == "https://shop.example"
    assert_same_answer(fast, full)
