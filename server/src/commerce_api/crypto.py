"""Encryption at rest for secrets the service must be able to read back (webhook signing
secrets: unlike API keys they cannot be stored as a hash, since we sign with them).

Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) under a key derived from
``COMMERCE_SECRET_KEY``. A sandbox instance without that setting generates a key once and keeps
it in its own database, so local work needs no set-up; production refuses to start without it.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

from cryptography.fernet import Fernet, InvalidToken

from commerce_api.db import Database
from commerce_api.instance import ensure_value
from commerce_api.settings import Settings

_GENERATED_KEY_NAME = "secret_key"


class SecretKeyMissing(RuntimeError):
    pass


class SecretBox:
    def __init__(self, key_material: str) -> None:
        digest = hashlib.sha256(key_material.encode()).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def encrypt_bytes(self, plaintext: bytes) -> bytes:
        return self._fernet.encrypt(plaintext)

    def decrypt(self, token: str) -> str:
        return self.decrypt_bytes(token.encode()).decode()

    def decrypt_bytes(self, token: bytes) -> bytes:
        try:
            return self._fernet.decrypt(token)
        except InvalidToken as exc:
            raise SecretKeyMissing(
                "cannot decrypt a stored secret: COMMERCE_SECRET_KEY differs from the key it "
                "was encrypted with"
            ) from exc


async def load_secret_box(settings: Settings, db: Database) -> SecretBox:
    if settings.secret_key:
        return SecretBox(settings.secret_key)
    if settings.environment == "production":
        raise SecretKeyMissing(
            "set COMMERCE_SECRET_KEY (32+ random characters, the same for every process): it "
            "encrypts webhook secrets at rest"
        )
    async with db.write() as conn:
        material = await ensure_value(conn, _GENERATED_KEY_NAME, secrets.token_urlsafe(32))
    return SecretBox(material)
