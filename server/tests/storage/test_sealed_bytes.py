"""``SecretBox.encrypt_bytes``: stored idempotent responses sealed with AES-256-GCM-SIV, read
back under the current or the previous key; responses sealed with Fernet before still read."""

from __future__ import annotations

import pytest

from commerce_api.storage.crypto import SecretBox, SecretKeyMissing

KEY = "k" * 32
PREVIOUS = "p" * 32
BODY = b'{"id": "ord_1", "shipping_address": {"line1": "1 Main St"}}'


def test_a_sealed_response_round_trips_and_hides_its_body() -> None:
    sealed = SecretBox(KEY).encrypt_bytes(BODY)
    assert sealed[:1] == b"\x01"
    assert b"Main St" not in sealed
    assert SecretBox(KEY).decrypt_bytes(sealed) == BODY  # the key, not the instance, decides
    assert SecretBox(KEY).encrypt_bytes(BODY) != sealed  # a fresh nonce each time


def test_a_response_sealed_under_the_previous_key_reads_after_a_rotation() -> None:
    sealed = SecretBox(PREVIOUS).encrypt_bytes(BODY)
    assert SecretBox(KEY, PREVIOUS).decrypt_bytes(sealed) == BODY
    with pytest.raises(SecretKeyMissing, match="COMMERCE_SECRET_KEY"):
        SecretBox(KEY).decrypt_bytes(sealed)


def test_a_tampered_response_is_refused() -> None:
    sealed = bytearray(SecretBox(KEY).encrypt_bytes(BODY))
    sealed[-1] ^= 1
    with pytest.raises(SecretKeyMissing):
        SecretBox(KEY).decrypt_bytes(bytes(sealed))


def test_a_response_stored_with_fernet_before_still_reads() -> None:
    box = SecretBox(KEY)
    fernet_token = box.encrypt(BODY.decode()).encode()  # what encrypt_bytes gave before
    assert fernet_token.startswith(b"gAAAAA")
    assert box.decrypt_bytes(fernet_token) == BODY
