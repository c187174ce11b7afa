"""Queries of the console, by concern.

- ``sessions``: the console's sessions, each with the current state of its key.
- ``listings``: what the pages list that the API has no list for (every account, the products
  with their stock, an order's events, the delivery states of a page of events).
- ``overview``: the overview's figures (orders and revenue per hour, the closed hours kept,
  pending orders, low stock, failing endpoints, the outbox's backlog).
"""
