"""The catalogue's pages: the product list with its filters, import, CSV export and bulk
archive, and a product's form and its stock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import Request
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.datastructures import FormData, UploadFile
from starlette.responses import Response

from commerce_api.catalog import importing
from commerce_api.catalog import service as catalog
from commerce_api.catalog.schemas import MAX_INVENTORY, ProductCreate, ProductUpdate
from commerce_api.console import repository
from commerce_api.console.pages import bulk, exports
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import (
    PAGE_SIZE,
    PREFIX,
    change_then_redirect,
    form_problems,
    form_text,
    page_number,
    pagination,
    redirect,
    render,
)
from commerce_api.core.errors import APIError, Problem, validation_error
from commerce_api.http.dependencies import ServicesDep

PRODUCT_FIELDS = ("name", "description", "price", "category", "inventory_count")
LIST_URL = f"{PREFIX}/products"
CSV_HEADER = ("id", *PRODUCT_FIELDS)


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


@dataclass(frozen=True, slots=True)
class ProductFilters:
    """The list's filters, from its query string: a category, a part of the name, and only
    the products low on stock (at most ``COMMERCE_LOW_STOCK_THRESHOLD`` units)."""

    category: str = ""
    q: str = ""
    low_stock: bool = False

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> ProductFilters:
        return cls(
            category=query.get("category", "").strip(),
            q=query.get("q", "").strip(),
            low_stock=query.get("low_stock", "") == "1",
        )

    def query(self) -> str:
        values = {
            "q": self.q,
            "category": self.category,
            "low_stock": "1" if self.low_stock else "",
        }
        return urlencode({key: value for key, value in values.items() if value})

    def max_stock(self, threshold: int) -> int | None:
        return threshold if self.low_stock else None


async def _catalogue_page(
    request: Request, services: ServicesDep, extra: Mapping[str, Any], status: int = 200
) -> Response:
    filters = ProductFilters.parse(request.query_params)
    category, name = filters.category or None, filters.q or None
    threshold = services.settings.low_stock_threshold
    max_stock = filters.max_stock(threshold)
    number = page_number(request)
    async with services.db.read() as conn:
        total = await repository.count_products(conn, category, name, max_stock)
        rows = await repository.page_products(
            conn, category, name, PAGE_SIZE, (number - 1) * PAGE_SIZE, max_stock
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
            "category": filters.category,
            "q": filters.q,
            "low_stock": filters.low_stock,
            "threshold": threshold,
            "query": filters.query(),
            "max_selected": bulk.MAX_SELECTED,
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


class _ImportRefused(Exception):
    """Rolls the import's transaction back (some record was invalid)."""


async def import_products(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """All or nothing, with every invalid record named: each record goes through the
    import on its own, in one transaction (one import) rolled back if any was refused."""
    upload = (await request.form()).get("file")
    errors: list[str] = []
    records: list[dict[str, Any]] = []
    if not isinstance(upload, UploadFile) or not upload.filename:
        errors.append("Choose a .json or .csv file to import.")
    else:
        try:
            content = (await upload.read()).decode("utf-8")
            records = importing.parse_import_file(upload.filename, content)
        except UnicodeDecodeError:
            errors.append("The file is not UTF-8 text.")
        except importing.InvalidImport as exc:
            errors.append(f"The file could not be read: {exc}.")
    result = importing.ImportResult(created=0, updated=0)
    if not errors:
        try:
            async with services.db.write() as conn:
                importer = importing.Importer(conn, session.principal)
                for index, record in enumerate(records, start=1):
                    try:
                        await importer.add([importing.Located(f"record {index}", "field", record)])
                    except importing.InvalidImport as exc:
                        errors.append(str(exc))
                if errors:
                    raise _ImportRefused
                result = importer.result
        except _ImportRefused:
            pass
    if errors:
        return await _catalogue_page(request, services, {"import_errors": errors}, 400)
    created, updated = str(result.created), str(result.updated)
    return redirect(f"{PREFIX}/products", created=created, updated=updated)


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


# --- export and bulk archive ---------------------------------------------------------------------


def _csv_row(product: Mapping[str, Any]) -> exports.CsvRow:
    """The import's columns, so an export edited in a spreadsheet imports back (its ``id``
    updates the product)."""
    price = f"{Decimal(str(product['price'])):.2f}"
    return (
        product["id"],
        product["name"],
        product["description"],
        price,
        product["category"],
        product["inventory_count"],
    )


async def export_products(
    request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    """The filtered list as CSV, every page of it, in the list's order."""
    filters = ProductFilters.parse(request.query_params)
    max_stock = filters.max_stock(services.settings.low_stock_threshold)

    async def read(
        conn: AsyncConnection, after: tuple[datetime, str] | None, limit: int
    ) -> tuple[list[exports.CsvRow], tuple[datetime, str] | None]:
        rows = await repository.products_after(
            conn, filters.category or None, filters.q or None, max_stock, after, limit
        )
        last = (rows[-1].created_at, rows[-1].id) if len(rows) == limit else None
        return [_csv_row(catalog.product_detail(row)) for row in rows], last

    chunks = exports.keyset_chunks(services.db, read)
    return exports.csv_download("products", CSV_HEADER, chunks)


ARCHIVE = bulk.BulkAction(
    "products",
    "product",
    "archive",
    "Archive",
    "Archived",
    "Each product leaves the catalogue; orders that have it keep it.",
    danger=True,
)


async def _bulk_form(request: Request) -> tuple[list[str], str, str, str | None]:
    """The bulk form's ids, back query and URL, and what is wrong with it."""
    form = await request.form()
    back = ProductFilters.parse(dict(parse_qsl(form_text(form, "back")))).query()
    back_url = LIST_URL + (f"?{back}" if back else "")
    ids = bulk.selected_ids(form)
    if form_text(form, "action") != ARCHIVE.value:
        return ids, back, back_url, "Choose Archive: nothing was changed."
    return ids, back, back_url, bulk.selection_error(ids, "product")


async def confirm_bulk(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    """The confirmation page of a bulk archive: the selected products as they are now."""
    ids, back, back_url, error = await _bulk_form(request)
    if error is not None:
        return bulk.refused_selection(request, ARCHIVE, error, back_url)
    selected = []
    async with services.db.read() as conn:
        for product_id in ids:
            try:
                product = await catalog.get_product(conn, product_id)
            except APIError as exc:
                selected.append(bulk.Selected(product_id, exc.message))
                continue
            summary = f"{product['name']} · {product['inventory_count']} in stock"
            selected.append(bulk.Selected(product_id, summary))
    run_url = f"{LIST_URL}/bulk/run"
    return bulk.confirmation(request, ARCHIVE, selected, run_url, back, back_url)


async def run_bulk(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """A confirmed bulk archive: each product through the API's archive, in a transaction of
    its own; the page says what happened to each."""
    ids, _back, back_url, error = await _bulk_form(request)
    if error is not None:
        return bulk.refused_selection(request, ARCHIVE, error, back_url)
    outcomes = await bulk.run_each(
        services.db,
        ids,
        lambda conn, product_id: catalog.archive_product(conn, session.principal, product_id),
    )
    return bulk.results(request, ARCHIVE, outcomes, LIST_URL, back_url)
