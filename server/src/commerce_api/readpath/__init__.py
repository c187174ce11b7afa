"""The hot read path: what clients poll (the catalogue, their key) served from memory, kept
exact across processes by the change stamps every write bumps in its own transaction
(``storage.freshness``).

- ``service``: ``ReadPath``, what the routes and the pipeline ask (products, pages, keys).
- ``catalog_cache``: the catalogue snapshot and the rendered product bodies.
- ``reader``: the reads behind them, compiled from ``catalog.repository``'s declarations.

May import: ``core``, ``settings``, ``storage``, ``accounts`` and ``catalog``.
See docs/performance.md for the measurements behind it.
"""
