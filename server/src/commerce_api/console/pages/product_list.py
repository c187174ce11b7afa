"""The products' list: its filters, import, CSV export and bulk archive. A product's own
pages are ``products``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.datastructures import UploadFile
from starlette.responses import Response

from commerce_api.catalog import importing
from commerce_api.catalog import service as catalog
from commerce_api.console.pages import bulk, exports
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.products import PRODUCT_FIELDS
from commerce_api.console.pages.render import (
    PAGE_SIZE,
    PREFIX,
    form_text,
    page_number,
    pagination,
    redirect,
    render,
)
from commerce_api.console.repository import listings
from commerce_api.core.errors import APIError
from commerce_api.http.dependencies import ServicesDep

LIST_URL = f"{PREFIX}/products"
CSV_HEADER = ("id", *PRODUCT_FIELDS)


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
        total = await listings.count_products(conn, category, name, max_stock)
        rows = await listings.page_products(
            conn, category, name, PAGE_SIZE, (number - 1) * PAGE_SIZE, max_stock
        )
        categories = await listings.categories(conn)
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
        rows = await listings.products_after(
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
