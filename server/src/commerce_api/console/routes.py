"""The console's pages under ``/dashboard``: plain HTML forms, each action one service call.

Every page but the sign-in page and the static files needs a session (:class:`ConsoleRoute`
redirects to the sign-in page without one) and every POST a CSRF token. A service's
``APIError`` is shown on the page with its status, never as the API's JSON. Pages are left out
of the OpenAPI document: they are not part of the API.

This module is the console's map: every URL and the page (in ``console.pages``) answering it.
"""

from __future__ import annotations

from fastapi import APIRouter

from commerce_api.console.pages import (
    accounts,
    audit,
    order_export,
    order_list,
    orders,
    overview,
    product_list,
    products,
    sign_in,
    webhooks,
)
from commerce_api.console.pages.guard import ConsoleRoute
from commerce_api.console.pages.render import PREFIX, SIGN_IN_URL


def uncounted(path: str) -> bool:
    """Whether a request for ``path`` is left out of the rate limit: the console's pages need
    a session, which needs an admin key (its live status polls would use up a per-IP quota).
    The sign-in form is counted, per client IP, like any request without a key."""
    return (path == PREFIX or path.startswith(PREFIX + "/")) and path != SIGN_IN_URL


# One router, its routes in the order they are matched ("/products/new", "/products/import",
# "/products/export" and "/products/bulk" before "/products/{product_id}"; so for orders).
router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
for _name, _type in sign_in.STATIC_FILES:
    router.add_api_route(f"/static/{_name}", sign_in.static_file(_name, _type), methods=["GET"])
for _path, _method, _page in (
    ("/sign-in", "GET", sign_in.sign_in_form),
    ("/sign-in", "POST", sign_in.sign_in),
    ("/sign-out", "POST", sign_in.sign_out),
    ("", "GET", overview.overview),
    ("/products", "GET", product_list.products_page),
    ("/products/new", "GET", products.new_product_form),
    ("/products", "POST", products.create_product),
    ("/products/import", "POST", product_list.import_products),
    ("/products/export", "GET", product_list.export_products),
    ("/products/bulk", "POST", product_list.confirm_bulk),
    ("/products/bulk/run", "POST", product_list.run_bulk),
    ("/products/{product_id}", "GET", products.product_page),
    ("/products/{product_id}", "POST", products.update_product),
    ("/products/{product_id}/archive", "POST", products.archive_product),
    ("/products/{product_id}/stock", "POST", products.set_stock),
    ("/orders", "GET", order_list.orders_page),
    ("/orders/export", "GET", order_export.export_orders),
    ("/orders/bulk", "POST", order_list.confirm_bulk),
    ("/orders/bulk/run", "POST", order_list.run_bulk),
    ("/orders/{order_id}", "GET", orders.order_page),
    ("/orders/{order_id}/status", "GET", orders.order_status),
    ("/orders/{order_id}/fulfil", "POST", orders.fulfil_order),
    ("/orders/{order_id}/cancel", "POST", orders.cancel_order),
    ("/webhooks", "GET", webhooks.webhooks_page),
    ("/webhooks/{account_id}/endpoints", "POST", webhooks.create_endpoint),
    ("/webhooks/{account_id}/endpoints/{endpoint_id}/enable", "POST", webhooks.enable_endpoint),
    ("/webhooks/{account_id}/endpoints/{endpoint_id}/test", "POST", webhooks.send_test_event),
    ("/webhooks/{account_id}/endpoints/{endpoint_id}/recover", "POST", webhooks.recover_endpoint),
    ("/events/{event_id}", "GET", webhooks.event_page),
    ("/events/{event_id}/redeliver", "POST", webhooks.redeliver_event),
    ("/accounts", "GET", accounts.accounts_page),
    ("/accounts", "POST", accounts.create_account),
    ("/keys", "POST", accounts.create_key),
    ("/keys/{key_id}/revoke", "POST", accounts.revoke_key),
    ("/audit", "GET", audit.audit_page),
):
    router.add_api_route(_path, _page, methods=[_method])

# A browser asks every site for /favicon.ico: the console's icon answers it (outside the
# prefix, without a session; a Starlette route, so not one of the API's operations).
router.add_route("/favicon.ico", sign_in.favicon, methods=["GET"], include_in_schema=False)
