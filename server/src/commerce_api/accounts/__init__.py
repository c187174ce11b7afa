"""Accounts (client integrations), their API keys, roles and authentication.

May import: ``core``, ``settings``, ``storage``. The HTTP layer builds on it (every
request authenticates), so it never imports ``http``.
"""
