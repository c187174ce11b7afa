"""The console's pages, one module a part of the console; ``console.routes`` maps their URLs.

- ``render``: the templates and what every page shares (notices, paging, redirects).
- ``guard``: :class:`ConsoleRoute`, the session and CSRF check in front of every page.
- ``sign_in``: the pages reachable without a session (signing in, the static files).
- ``overview``, ``product_list`` (the products' list), ``products`` (a product),
  ``order_list`` (the orders' list), ``orders`` (an order),
  ``webhooks`` (and events), ``accounts`` (and keys), ``audit`` (the audit trail, and an
  order's timeline).
- ``bulk`` and ``exports``: what the lists' bulk actions (confirm, then each id through its
  service call) and CSV exports (streamed by keyset chunks) share.
"""
