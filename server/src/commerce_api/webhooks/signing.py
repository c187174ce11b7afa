"""Standard Webhooks signatures (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``),
made with the ``standardwebhooks`` library so any of its verifiers accepts them."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature_header(
    signing_secrets: Sequence[str], message_id: str, timestamp: datetime, body: str
) -> str:
    """``v1,<sig>`` for each secret, space-separated: during a rotation receivers holding either
    the old or the new secret can verify."""
    return " ".join(
        _webhook(secret).sign(msg_id=message_id, timestamp=timestamp, data=body)
        for secret in signing_secrets
    )


@lru_cache(maxsize=1024)
def _webhook(secret: str) -> Webhook:
    """The signer of a secret, made once (it decodes the secret) rather than per attempt."""
    return Webhook(secret)
