"""Webhooks: endpoint registration, signed deliveries from the outbox, retries, replay.

May import: ``core``, ``settings``, ``storage``, ``observability``, ``accounts``, ``http`` and
``audit``.
"""
