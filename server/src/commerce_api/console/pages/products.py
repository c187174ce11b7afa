"""A product's pages: the form of a new product or of one that exists, and what they post
(create, update, archive, set the stock). The products' list is ``product_list``."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.responses import Response

from commerce_api.catalog import service as catalog
from commerce_api.catalog.schemas import MAX_INVENTORY, ProductCreate, ProductUpdate
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import (
    PREFIX,
    change_then_redirect,
    form_problems,
    form_text,
    redirect,
    render,
)
from commerce_api.core.errors import APIError, Problem, validation_error
from commerce_api.http.dependencies import ServicesDep

PRODUCT_FIELDS = ("name", "description", "price", "category", "inventory_count")


def _product_fields(form: FormData) -> tuple[dict[str, Any], list[Problem]]:
    """The product's fields from a form (numbers parsed), and what could not be parsed."""
    fields: dict[str, Any] = {}
    errors: list[Problem] = []
    for name in PRODUCT_FIELDS:
        value = form.get(name)
        if isinstance(value, str):
            fields[name] = value if name == "description" else value.strip()
    try:
        if "price" in fields:
            fields["price"] = float(Decimal(fields["price"]))
    except InvalidOperation:
        errors.append(
            Problem("price", "validation_failed", "Price must be a number such as 19.99.")
        )
    try:
        if "inventory_count" in fields:
            fields["inventory_count"] = int(fields["inventory_count"] or "0")
    except ValueError:
        errors.append(
            Problem("inventory_count", "validation_failed", "Stock must be a whole number.")
        )
    return fields, errors


def _validation_problems(exc: ValidationError) -> list[Problem]:
    return validation_error(exc.errors()).problems


async def new_product_form(request: Request, _session: SessionDep) -> Response:
    return render(request, "product.html", {"nav": "products", "product": None, "values": {}})


async def create_product(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    form = await request.form()
    fields, errors = _product_fields(form)
    if not errors:
        try:
            data = ProductCreate.model_validate(fields)
        except ValidationError as exc:
            errors = _validation_problems(exc)
    if errors:
        context = {"nav": "products", "product": None, "values": form, **form_problems(errors)}
        return render(request, "product.html", context, 400)
    async with services.db.write() as conn:
        product = await catalog.create_product(conn, session.principal, data)
    return redirect(f"{PREFIX}/products/{product['id']}", "product-created")


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
    product_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    form = await request.form()
    fields, errors = _product_fields(form)
    if not errors:
        errors = await _update(services, session, product_id, fields)
    if errors:
        extra = {"values": form, **form_problems(errors)}
        return await _product_page(request, services, product_id, extra, 400)
    return redirect(f"{PREFIX}/products/{product_id}", "product-saved")


async def _update(
    services: ServicesDep, session: SessionDep, product_id: str, fields: dict[str, Any]
) -> list[Problem]:
    """The API's product update of ``fields`` by the session's key; what went wrong, if
    anything, as the page's error messages."""
    try:
        data = ProductUpdate.model_validate(fields)
        async with services.db.write() as conn:
            await catalog.update_product(conn, session.principal, product_id, data)
    except ValidationError as exc:
        return _validation_problems(exc)
    except APIError as exc:
        return exc.problems or [Problem("", exc.reason, exc.message)]
    return []


async def archive_product(
    product_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    return await change_then_redirect(
        services.db,
        lambda conn: catalog.archive_product(conn, session.principal, product_id),
        lambda exc: _product_page(request, services, product_id, {"errors": [exc.message]}, 404),
        f"{PREFIX}/products",
        "product-archived",
    )


async def set_stock(
    product_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    """Set the stock to a value (the form's ``inventory_count``): the API's product update of
    that one field, so the other fields are left as they are (and the audit trail records the
    old and new count, by the session's key)."""
    text = form_text(await request.form(), "inventory_count")
    errors: list[Problem] = []
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(MAX_INVENTORY))):
        message = f"Stock must be a whole number of units, from 0 to {MAX_INVENTORY}."
        errors = [Problem("stock", "validation_failed", message)]
    else:
        errors = await _update(services, session, product_id, {"inventory_count": int(text)})
        # The stock form's own field, not the product form's `inventory_count` above it.
        errors = [p._replace(parameter="stock") if p.parameter else p for p in errors]
    if errors:
        extra = {**form_problems(errors), "stock_value": text}
        return await _product_page(request, services, product_id, extra, 400)
    return redirect(f"{PREFIX}/products/{product_id}", "stock-set")
