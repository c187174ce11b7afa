"""Prefixed, random, URL-safe identifiers (``prod_…``, ``ord_…``) and API key secrets."""

from __future__ import annotations

import re
import secrets
import string

_ALPHABET = string.ascii_letters + string.digits
ID_RANDOM_LENGTH = 24  # 62**24 ~ 2**143: collisions are not a practical concern
KEY_RANDOM_LENGTH = 32

PREFIXES = frozenset({"prod", "ord", "acct", "key", "we", "evt", "req", "att", "aud"})

_ID_PATTERN = re.compile(r"(?P<prefix>[a-z]+)_[A-Za-z0-9]{1,64}")


# Byte → base62 character for bytes below 248 (= 4 x 62, so each character is equally
# likely); the 8 bytes above are deleted (rejection sampling: exact uniformity).
_ACCEPTED = 4 * len(_ALPHABET)
_TO_BASE62 = bytes.maketrans(bytes(range(_ACCEPTED)), (_ALPHABET * 4).encode("ascii"))
_REJECTED = bytes(range(_ACCEPTED, 256))


def random_token(length: int) -> str:
    """``length`` uniformly random base62 characters from the OS's CSPRNG.

    Random bytes mapped to characters with ``bytes.translate``, the few out-of-range bytes
    dropped: one C call per draw, instead of ``secrets.choice`` per character.
    """
    out = b""
    while len(out) < length:
        # ~3 % of bytes are dropped; a quarter more covers that almost always in one draw.
        out += secrets.token_bytes(length + length // 4 + 4).translate(_TO_BASE62, _REJECTED)
    return out[:length].decode("ascii")


def new_id(prefix: str) -> str:
    """A fresh identifier such as ``prod_3fA9…``."""
    assert prefix in PREFIXES, prefix
    return f"{prefix}_{random_token(ID_RANDOM_LENGTH)}"


def looks_like(prefix: str, value: str) -> bool:
    """True when ``value`` has the shape of an id with this prefix.

    Used to answer 404 for ids that cannot exist without asking the database (and without
    handing arbitrary bytes, such as NUL, to it).
    """
    match = _ID_PATTERN.fullmatch(value)
    return match is not None and match.group("prefix") == prefix
