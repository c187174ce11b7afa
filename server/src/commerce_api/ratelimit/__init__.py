"""Tiered hourly quotas with the spec's ``X-RateLimit-*`` headers on every response.

May import: ``core``, ``settings`` and ``observability``.
"""
