"""Accounts (client integrations), their API keys, roles and authentication."""
