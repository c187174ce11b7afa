"""The webhooks' queries, by concern.

- ``endpoints``: the endpoints, their secrets and health, and which of them an event goes to.
- ``outbox``: the deliveries, one per event and endpoint.
- ``claims``: a dispatcher's claims on the deliveries it attempts, of the ``candidates`` (fair
  between accounts, within each endpoint's attempts in flight); ``claim_ends``: how a claim
  ends (its outcome recorded, given back, or lapsed: an interrupted attempt).
- ``attempts``: the history of attempts at each delivery.

What another domain uses is named here too: ``events`` makes an event's deliveries, redelivers
it and shows its deliveries and attempts.
"""

from commerce_api.webhooks.repository.attempts import INTERRUPTED, attempts_of
from commerce_api.webhooks.repository.endpoints import subscribed_endpoints, subscribers
from commerce_api.webhooks.repository.outbox import (
    deliveries_of,
    enqueue,
    has_queued_redelivery,
    new_delivery,
    subscribed_deliveries_sql,
)

__all__ = [
    "INTERRUPTED",
    "attempts_of",
    "deliveries_of",
    "enqueue",
    "has_queued_redelivery",
    "new_delivery",
    "subscribed_deliveries_sql",
    "subscribed_endpoints",
    "subscribers",
]
