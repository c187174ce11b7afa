"""Catalogue endpoints: ``/v1/products``, ``/v1/categories``."""

from __future__ import annotations

from typing import Annotated, Protocol

from fastapi import APIRouter, Depends, Query
from starlette.requests import Request
from starlette.responses import Response

from commerce_api.catalog import service
from commerce_api.catalog.schemas import (
    MAX_CATEGORY_LENGTH,
    MAX_SEARCH_LENGTH,
    CategoryList,
    Product,
    ProductCreate,
    ProductList,
    ProductSort,
    ProductUpdate,
)
from commerce_api.core.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from commerce_api.http import idempotency
from commerce_api.http.context import RequestContext
from commerce_api.http.dependencies import (
    AdminPrincipal,
    CatalogPrincipal,
    RequestContextDep,
    ServicesDep,
    request_services,
)
from commerce_api.http.paging import Limit, Offset
from commerce_api.http.pipeline import RenderedJSON
from commerce_api.http.routing import (
    StrictRoute,
    error_responses,
    json_response,
    served_first,
)
from commerce_api.http.schemas import SingleLine
from commerce_api.http.services import Authenticator, RequestServices


class CatalogReads(Authenticator, Protocol):
    """The read path (``readpath.service.ReadPath``, a package above this one): keys, and the
    catalogue's cached bytes."""

    async def page(
        self, request: RequestContext, category: str | None, limit: int, offset: int, sort: str
    ) -> bytes | None: ...

    async def categories(self, request: RequestContext) -> bytes | None: ...

    async def search(
        self,
        request: RequestContext,
        q: str,
        category: str | None,
        sort: str,
        limit: int,
        offset: int,
    ) -> bytes: ...

    async def product_body(self, request: RequestContext, product_id: str) -> bytes | None: ...


class CatalogServices(RequestServices, Protocol):
    """The services the catalogue's reads use: the kit's, with the read path's cached bytes."""

    @property
    def read_path(self) -> CatalogReads: ...


CatalogServicesDep = Annotated[CatalogServices, Depends(request_services)]

router = APIRouter(prefix="/v1/products", tags=["Products"], route_class=StrictRoute)
categories_router = APIRouter(prefix="/v1/categories", tags=["Categories"], route_class=StrictRoute)


@router.get(
    "",
    response_model=ProductList,
    responses=error_responses(401),
    summary="List products",
)
@served_first
async def list_products(
    ctx: RequestContextDep,
    services: CatalogServicesDep,
    _principal: CatalogPrincipal,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
    category: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_CATEGORY_LENGTH, description="Only this category."),
        SingleLine,
    ] = None,
    q: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_SEARCH_LENGTH,
            description="Only products whose name or description has every word of this "
            "(case-insensitive; each word matches the words it begins, `note` finds "
            "`Notebook`). Words are runs of letters and digits; a `q` without any finds "
            "nothing.",
        ),
        SingleLine,
    ] = None,
    sort: Annotated[
        ProductSort,
        Query(
            description="The order: by `created_at` (the default), `price` or `name` (by "
            "code point), ties in creation order; `-created_at` and `-price` are their exact "
            "reverse. With `q` too."
        ),
    ] = "created_at",
) -> Response:
    """Active products in creation order (then id) unless `sort` says otherwise, so pages
    never repeat or skip an item.

    List items omit `inventory_count` and `updated_at`; read one product for those.
    """
    limit = min(limit, MAX_PAGE_SIZE)  # clamped, as every list's limit (core.pagination)
    if q is not None:
        return RenderedJSON(await services.read_path.search(ctx, q, category, sort, limit, offset))
    cached = await services.read_path.page(ctx, category, limit, offset, sort)
    if cached is not None:
        return RenderedJSON(cached)
    async with services.db.read() as conn:
        page = await service.list_products(
            conn, category=category, limit=limit, offset=offset, sort=sort
        )
    return json_response(page)


@router.get(
    "/{id}",
    response_model=Product,
    responses=error_responses(401),
    summary="Retrieve a product",
)
@served_first
async def get_product(
    id: str, ctx: RequestContextDep, services: CatalogServicesDep, _principal: CatalogPrincipal
) -> Response:
    """One product with its current `inventory_count`. Unknown or archived ids are 404."""
    body = await services.read_path.product_body(ctx, id)
    if body is None:
        raise service.product_not_found(id)
    return RenderedJSON(body)


@router.post(
    "",
    response_model=Product,
    status_code=201,
    responses=error_responses(401, 403, 413, 415),
    summary="Create a product (admin)",
)
async def create_product(
    body: ProductCreate, request: Request, services: ServicesDep, admin: AdminPrincipal
) -> Response:
    """Add a product to the catalogue. Needs an admin key."""
    async with services.db.write() as conn:
        product = await service.create_product(conn, admin, body)
        response = json_response(product, 201, {"Location": f"/v1/products/{product['id']}"})
        await idempotency.record(conn, request, response)  # the key, with the change
    return response


@router.patch(
    "/{id}",
    response_model=Product,
    responses=error_responses(401, 403, 413, 415),
    summary="Update a product (admin)",
)
async def update_product(
    id: str, body: ProductUpdate, services: ServicesDep, admin: AdminPrincipal
) -> Response:
    """Change some fields of a product; omitted fields keep their value. Needs an admin key."""
    async with services.db.write() as conn:
        product = await service.update_product(conn, admin, id, body)
    return json_response(product)


@router.delete(
    "/{id}",
    status_code=204,
    responses=error_responses(401, 403),
    summary="Archive a product (admin)",
)
async def archive_product(id: str, services: ServicesDep, admin: AdminPrincipal) -> Response:
    """Hide a product from the catalogue. Orders that reference it keep their copy of its
    name and price. Needs an admin key."""
    async with services.db.write() as conn:
        await service.archive_product(conn, admin, id)
    return Response(status_code=204)


@categories_router.get(
    "",
    response_model=CategoryList,
    responses=error_responses(401),
    summary="List categories",
)
@served_first
async def list_categories(
    ctx: RequestContextDep, services: CatalogServicesDep, _principal: CatalogPrincipal
) -> Response:
    """Every category that has active products, by name (code point order), with how many
    (`product_count`): a storefront's category menu. Not paginated."""
    cached = await services.read_path.categories(ctx)
    if cached is not None:
        return RenderedJSON(cached)
    async with services.db.read() as conn:
        categories = await service.list_categories(conn)
    return json_response(categories)
