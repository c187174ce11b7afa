"""Orders: placing them with atomic stock reservation, reading, cancelling, fulfilling.

May import: ``core``, ``settings``, ``storage``, ``accounts``, ``http``, ``audit`` and
``events``.
"""
