"""The audit trail (issue 29): who changed what, and ``/v1/audit_events``.

- ``service``: ``record`` writes one row in the caller's transaction — the change and its
  audit row commit or roll back together — and the actors (``actor_of`` a key, ``SWEEPER``,
  ``CLI``); the list and the pruning past ``COMMERCE_AUDIT_RETENTION_DAYS``.
- ``repository``: its SQL; ``routes``, ``schemas``: the admin-only list.

May import: ``core``, ``settings``, ``storage``, ``accounts`` and ``http``. The packages whose
changes are audited (``catalog``, ``webhooks``, ``events``, ``orders``, ``console``, ``cli``)
import it.
"""
