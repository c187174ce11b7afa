"""Encryption at rest for secrets the service must be able to read back (webhook signing
secrets: unlike API keys they cannot be stored as a hash, since we sign with them).

Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) under a key derived from
``COMMERCE_SECRET_KEY`` with HKDF-SHA256. Stored idempotent responses (``encrypt_bytes``, one
per keyed order, on the order path) use AES-256-GCM-SIV under a second HKDF key instead: one C
call, ~2 µs against Fernet's ~9 µs, and a random 96-bit nonce is safe however many responses
are sealed (SIV: a repeated nonce would reveal only that two responses were equal). A build
of ``cryptography`` without it (OpenSSL before 3.2) seals them with Fernet, as before; both
kinds are read. A sandbox instance without that setting generates a key
once and keeps it in its own database, so local work needs no set-up; production refuses to
start without it.

Rotation: set the new ``COMMERCE_SECRET_KEY`` and the old one as
``COMMERCE_SECRET_KEY_PREVIOUS`` (in every process). Stored secrets are decrypted with whichever
key made them and re-encrypted with the new one at start (``reencrypt_stored_secrets``); once
every process has started with the new key, the previous one can be removed. Tokens made before
HKDF (a plain SHA-256 of the setting) are still read, and rewritten the same way.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag, UnsupportedAlgorithm
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from commerce_api.settings import Settings
from commerce_api.storage.instance import ensure_value

if TYPE_CHECKING:
    from commerce_api.storage.db import Database

_GENERATED_KEY_NAME = "secret_key"


class SecretKeyMissing(RuntimeError):
    pass


_HKDF_INFO = b"commerce-api secret box v1"
_SIV_INFO = b"commerce-api sealed bytes v1 (AES-256-GCM-SIV)"
# A sealed value's first byte: never the first of a Fernet token (URL-safe base64 text).
_SIV_VERSION = b"\x01"
_NONCE_BYTES = 12


def _derived(key_material: str) -> Fernet:
    """The Fernet key of a secret-key setting: HKDF-SHA256, 32 bytes (16 sign, 16 encrypt)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO)
    return Fernet(base64.urlsafe_b64encode(hkdf.derive(key_material.encode())))


def _sealer(key_material: str) -> AESGCMSIV | None:
    """The AES-256-GCM-SIV key of a secret-key setting (None if this build lacks it)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_SIV_INFO)
    try:
        return AESGCMSIV(hkdf.derive(key_material.encode()))
    except UnsupportedAlgorithm:
        return None


def _legacy(key_material: str) -> Fernet:
    """The key of releases before HKDF (a plain SHA-256): read, never written."""
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(key_material.encode()).digest()))


class SecretBox:
    def __init__(self, key_material: str, previous: str | None = None) -> None:
        # Encrypts with the first; decrypts with any (MultiFernet tries them in turn).
        keys = [_derived(key_material), _legacy(key_material)]
        if previous:
            keys += [_derived(previous), _legacy(previous)]
        self._fernet = MultiFernet(keys)
        self._current = keys[0]
        sealers = [_sealer(key_material), *([_sealer(previous)] if previous else [])]
        self._sealers = [sealer for sealer in sealers if sealer is not None]

    def is_current(self, token: str) -> bool:
        """Whether ``token`` was made with the current key (no re-encryption needed)."""
        try:
            self._current.decrypt(token.encode())
        except InvalidToken:
            return False
        return True

    def reencrypt(self, token: str) -> str:
        """``token`` under the current key (with its original timestamp)."""
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken as exc:
            raise SecretKeyMissing(
                "cannot decrypt a stored secret: neither COMMERCE_SECRET_KEY nor "
                "COMMERCE_SECRET_KEY_PREVIOUS is the key it was encrypted with"
            ) from exc

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def encrypt_bytes(self, plaintext: bytes) -> bytes:
        if not self._sealers:
            return self._fernet.encrypt(plaintext)
        nonce = os.urandom(_NONCE_BYTES)
        return _SIV_VERSION + nonce + self._sealers[0].encrypt(nonce, plaintext, None)

    def decrypt(self, token: str) -> str:
        return self.decrypt_bytes(token.encode()).decode()

    def decrypt_bytes(self, token: bytes) -> bytes:
        if token[:1] == _SIV_VERSION:
            nonce, sealed = token[1 : 1 + _NONCE_BYTES], token[1 + _NONCE_BYTES :]
            for sealer in self._sealers:  # the current key's first, then the previous one's
                try:
                    return sealer.decrypt(nonce, sealed, None)
                except InvalidTag:
                    continue
            raise SecretKeyMissing(
                "cannot decrypt a stored response: COMMERCE_SECRET_KEY differs from the key it "
                "was encrypted with"
            )
        try:
            return self._fernet.decrypt(token)
        except InvalidToken as exc:
            raise SecretKeyMissing(
                "cannot decrypt a stored secret: COMMERCE_SECRET_KEY differs from the key it "
                "was encrypted with"
            ) from exc


def check_secret_key(settings: Settings) -> None:
    """Production needs ``COMMERCE_SECRET_KEY``; a sandbox without it generates one."""
    if not settings.secret_key and settings.environment == "production":
        raise SecretKeyMissing(
            "set COMMERCE_SECRET_KEY (32+ random characters, the same for every process): it "
            "encrypts webhook secrets at rest"
        )


async def load_secret_box(settings: Settings, db: Database) -> SecretBox:
    if settings.secret_key:
        return SecretBox(settings.secret_key, settings.secret_key_previous)
    check_secret_key(settings)
    async with db.write() as conn:
        material = await ensure_value(conn, _GENERATED_KEY_NAME, secrets.token_urlsafe(32))
    return SecretBox(material)
