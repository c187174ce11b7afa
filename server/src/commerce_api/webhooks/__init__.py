"""Webhooks: endpoint registration, signed deliveries from the outbox, retries, replay."""
