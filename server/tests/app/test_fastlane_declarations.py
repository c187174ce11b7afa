"""The fast lane takes what it does from the routes' declarations, as the routes do: how a route
runs under an ``Idempotency-Key`` (``routing.key_handling``), and which routes it can serve at
all (refused at start-up, never guessed)."""

from __future__ import annotations

import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.responses import Response

from commerce_api.app.fastlane_routes import ServedRoute
from commerce_api.http.dependencies import CurrentPrincipal
from commerce_api.http.routing import (
    KEY_IN_OWN_WRITE,
    KEY_STORED,
    StrictRoute,
    json_response,
    key_handling,
    places_orders,
)
from commerce_api.orders.routes import router as orders_router

router = APIRouter(route_class=StrictRoute)


@router.post("/stored")
@places_orders
async def stored(principal: CurrentPrincipal) -> Response:
    return json_response({})


@router.post("/things/{id}")
@places_orders
async def at_a_parameter(id: str, principal: CurrentPrincipal) -> Response:
    return json_response({})


def _route(routes: APIRouter, path: str, method: str) -> APIRoute:
    (found,) = (
        route
        for route in routes.routes
        if isinstance(route, APIRoute) and route.path == path and method in (route.methods or ())
    )
    return found


def test_the_fast_lane_runs_a_key_as_the_routes_run_it() -> None:
    create_order = _route(orders_router, "/v1/orders", "POST")
    assert key_handling(create_order) == KEY_IN_OWN_WRITE
    assert ServedRoute.of(create_order).key_handling == KEY_IN_OWN_WRITE
    # A POST whose endpoint does not record its key itself: the answer is stored apart (the
    # fast lane leaves a keyed request of it to the routes).
    assert ServedRoute.of(_route(router, "/stored", "POST")).key_handling == KEY_STORED
    # A read takes no key.
    assert key_handling(_route(orders_router, "/v1/orders/{id}", "GET")) is None


def test_the_fast_lane_places_orders_only_at_a_path_without_parameters() -> None:
    with pytest.raises(TypeError, match="without parameters"):
        ServedRoute.of(_route(router, "/things/{id}", "POST"))
