"""``Idempotency-Key``: what a key's stored outcome is and when it is replayed (``service``),
and its table (``repository``). No HTTP here: the request edge (``http/idempotency.py``) reads
the header and renders a stored outcome as a response; the order batch
(``orders/placement.py``) claims and stores its keys in its own transaction.

May import: ``core`` and ``storage``."""
