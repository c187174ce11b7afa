"""The catalogue's pages: the product list with its search and import, and a product's form."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.responses import Response

from commerce_api.catalog import service as catalog
from commerce_api.catalog.schemas import ProductCreate, ProductUpdate
from commerce_api.console import repository
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import (
    PAGE_SIZE,
    PREFIX,
    change_then_redirect,
    page_number,
    pagination,
    redirect,
    render,
)
from commerce_api.core.errors import APIError, describe_validation_error
from commerce_api.http.dependencies import ServicesDep

PRODUCT_FIELDS = ("name", "description", "price", "category", "inventory_count")


def _product_fields(form: FormData) -> tuple[dict[str, Any], list[str]]:
    """The product's fields from a form (numbers parsed), and what could not be parsed."""
    fields: dict[str, Any] = {}
    errors: list[str] = []
    for name in PRODUCT_FIELDS:
        value = form.get(name)
        if isinstance(value, str):
            fields[name] = value if name == "description" else value.strip()
    try:
        if "price" in fields:
            fields["price"] = float(Decimal(fields["price"]))
    except InvalidOperation:
        errors.append("Price must be a number such as 19.99.")
    try:
        if "inventory_count" in fields:
            fields["inventory_count"] = int(fields["inventory_count"] or "0")
    except ValueError:
        errors.append("Stock must be a whole number.")
    return fields, errors


def _validation_messages(exc: ValidationError) -> list[str]:
    return [describe_validation_error(error)[0] for error in exc.errors()]


async def _catalogue_page(
    request: Request, services: ServicesDep, extra: Mapping[str, Any], status: int = 200
) -> Response:
    category = request.query_params.get("category", "").strip() or None
    name = request.query_params.get("q", "").strip() or None
    number = page_number(request)
    async with services.db.read() as conn:
        total = await repository.count_products(conn, category, name)
        rows = await repository.page_products(
            conn, category, name, PAGE_SIZE, (number - 1) * PAGE_SIZE
        )
        categories = await repository.categories(conn)
    imported = request.query_params.get("created"), request.query_params.get("updated")
    return render(
        request,
        "products.html",
        {
            "nav": "products",
            "products": [catalog.product_detail(row) for row in rows],
            "categories": categories,
            "category": category or "",
            "q": name or "",
            "pages": pagination(number, total),
            "imported": imported if all(n and n.isdigit() for n in imported) else None,
            **extra,
        },
        status,
    )


async def products_page(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    return await _catalogue_page(request, services, {})


async def new_product_form(request: Request, _session: SessionDep) -> Response:
    return render(request, "product.html", {"nav": "products", "product": None, "values": {}})


async def create_product(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    form = await request.form()
    fields, errors = _product_fields(form)
    if not errors:
        try:
            data = ProductCreate.model_validate(fields)
        except ValidationError as exc:
            errors = _validation_messages(exc)
    if errors:
        context = {"nav": "products", "product": None, "values": form, "errors": errors}
        return render(request, "product.html", context, 400)
    async with services.db.write() as conn:
        product = await catalog.create_product(conn, data)
    return redirect(f"{PREFIX}/products/{product['id']}", "product-created")


class _ImportRefused(Exception):
    """Rolls the import's transaction back (some record was invalid)."""


async def import_products(
    request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    """All or nothing, with every invalid record named: each record goes through the
    service's import on its own, in one transaction rolled back if any was refused."""
    upload = (await request.form()).get("file")
    errors: list[str] = []
    records: list[dict[str, Any]] = []
    if not isinstance(upload, UploadFile) or not upload.filename:
        errors.append("Choose a .json or .csv file to import.")
    else:
        try:
            content = (await upload.read()).decode("utf-8")
            records = catalog.parse_import_file(upload.filename, content)
        except UnicodeDecodeError:
            errors.append("The file is not UTF-8 text.")
        except catalog.InvalidImport as exc:
            errors.append(f"The file could not be read: {exc}.")
    created = 0
    updated: set[object] = set()  # the products updated (several records may name one)
    if not errors:
        try:
            async with services.db.write() as conn:
                for index, record in enumerate(records, start=1):
                    try:
                        result = await catalog.import_products(conn, [record])
                    except catalog.InvalidImport as exc:
                        errors.append(f"record {index}: {str(exc).split(': ', 1)[-1]}")
                        continue
                    created += result.created
                    if result.updated:
                        updated.add(record["id"])
                if errors:
                    raise _ImportRefused
        except _ImportRefused:
            pass
    if errors:
        return await _catalogue_page(request, services, {"import_errors": errors}, 400)
    return redirect(f"{PREFIX}/products", created=str(created), updated=str(len(updated)))


async def _product_page(
    request: Request, services: ServicesDep, product_id: str, extra: Mapping[str, Any], status: int
) -> Response:
    try:
        async with services.db.read() as conn:
            product = await catalog.get_product(conn, product_id)
    except APIError as exc:
        return render(request, "message.html", {"title": "Not found", "error": exc.message}, 404)
    context = {"nav": "products", "product": product, "values": product, **extra}
    return render(request, "product.html", context, status)


async def product_page(
    product_id: str, request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    return await _product_page(request, services, product_id, {}, 200)


async def update_product(
    product_id: str, request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    form = await request.form()
    fields, errors = _product_fields(form)
    if not errors:
        try:
            data = ProductUpdate.model_validate(fields)
            async with services.db.write() as conn:
                await catalog.update_product(conn, product_id, data)
        except ValidationError as exc:
            errors = _validation_messages(exc)
        except APIError as exc:
            errors = [exc.message]
    if errors:
        extra = {"values": form, "errors": errors}
        return await _product_page(request, services, product_id, extra, 400)
    return redirect(f"{PREFIX}/products/{product_id}", "product-saved")


async def archive_product(
    product_id: str, request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    return await change_then_redirect(
        services.db,
        lambda conn: catalog.archive_product(conn, product_id),
        lambda exc: _product_page(request, services, product_id, {"errors": [exc.message]}, 404),
        f"{PREFIX}/products",
        "product-archived",
    )
