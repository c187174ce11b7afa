"""The operator console at ``/dashboard``: server-rendered pages for admin keys (issue 19).

- ``routes``: the console's router, every URL and the page answering it.
- ``pages/``: the pages and their HTML forms, a module a part of the console; every action
  calls the same service function as the API (``catalog``, ``orders``, ``webhooks``,
  ``accounts``), never a rule of its own.
- ``sessions``: server-side sessions in the database (``console_sessions``, only a hash of the
  token stored), their idle timeout and their end when the key behind them is revoked; and the
  CSRF tokens every state-changing form carries.
- ``repository/``: the console's own queries: ``sessions``; ``listings``, the reads the API
  has no list for (accounts, a name search and low-stock filter of the catalogue, its export
  by keyset, an order's events); ``overview``, the overview's figures.
- ``templates/`` (Jinja2) and ``static/`` (a hand-written stylesheet and script), package data.

It may import the domain packages' services and repositories, ``http``, ``core``, ``storage``
and ``observability.metrics``; nothing imports it but ``app``.
"""
