"""Tiered hourly quotas with the spec's ``X-RateLimit-*`` headers on every response."""
