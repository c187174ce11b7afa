"""Prefixed, random, URL-safe identifiers (``prod_…``, ``ord_…``) and API key secrets."""

from __future__ import annotations

import re
import secrets
import string

_ALPHABET = string.ascii_letters + string.digits
ID_RANDOM_LENGTH = 24  # 62**24 ~ 2**143: collisions are not a practical concern
KEY_RANDOM_LENGTH = 32

PREFIXES = frozenset({"prod", "ord", "acct", "key", "we", "evt", "req", "att"})

_ID_PATTERN = re.compile(r"(?P<prefix>[a-z]+)_[A-Za-z0-9]{1,64}")


def random_token(length: int) -> str:
    """``length`` uniformly random base62 characters from the OS's CSPRNG.

    One big random integer written in base 62, rather than ``secrets.choice`` per character:
    a tenth of the cost, which matters for the request id every response carries.
    """
    # 62**length needs just under 6 bits per character; 64 bits more than that make the
    # digits uniform to within 2**-64 without rejection sampling.
    number = int.from_bytes(secrets.token_bytes(length * 6 // 8 + 8), "big")
    digits = []
    for _ in range(length):
        number, digit = divmod(number, 62)
        digits.append(_ALPHABET[digit])
    return "".join(digits)


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
