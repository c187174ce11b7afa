"""What text the service stores: valid Unicode without control characters (the request
models' ``SingleLine`` and ``MultiLine``, and the import's own checks, apply it)."""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f]")
_CONTROL_MULTILINE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # tab, LF, CR allowed


def check_text(value: str, *, multiline: bool) -> str:
    """``value`` if it is valid Unicode without control characters (``multiline``: but tab,
    LF and CR), else ValueError saying so."""
    # NUL cannot be stored by PostgreSQL, and lone surrogates are not encodable as UTF-8:
    # refuse them here so they can never reach (and fail in) the database.
    if not value.isascii():  # (ASCII text, most text, cannot hold a surrogate)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("must be valid Unicode text") from None
    if (_CONTROL_MULTILINE if multiline else _CONTROL).search(value):
        raise ValueError("must not contain control characters")
    return value
