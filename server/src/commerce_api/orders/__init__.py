"""Orders: placing them with atomic stock reservation, reading, cancelling, fulfilling.

May import: ``core``, ``settings``, ``storage``, ``accounts``, ``idempotency``, ``http`` (its
routes and schemas; placement returns plain results), ``audit`` and ``events``.
"""
