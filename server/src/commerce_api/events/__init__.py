"""Events (``order.created``…): the outbox the webhook dispatcher delivers from."""
