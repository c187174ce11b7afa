"""CSV cells a spreadsheet shows as text: OWASP's rule against CSV injection, and its undoing.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to
a spreadsheet. Every CSV the service writes passes each cell through :func:`neutralise_cell`,
which puts an apostrophe before such a cell (spreadsheets show the text after it and hide the
apostrophe). So that an export reads back as it was, a cell that already starts with
apostrophes followed by one of those characters gets one more; :func:`restore_cell`, used by
the products' CSV import, takes exactly one apostrophe off a cell made of apostrophes followed
by one of those characters, and leaves every other cell alone. The two are inverses: a value
exported then imported is the value again (``=1`` → ``'=1`` → ``=1``; ``'=1`` → ``''=1`` →
``'=1``; ``'quoted`` stays ``'quoted`` both ways).
"""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a cell a formula to a spreadsheet (OWASP)."""

_PREFIX = "'"


def _reads_as_formula(text: str) -> bool:
    """Whether ``text``, past any leading apostrophes, starts with a formula character."""
    return text.lstrip(_PREFIX).startswith(FORMULA_STARTS)


def neutralise_cell(value: object) -> str:
    """``value`` as the text of a CSV cell that a spreadsheet shows, never runs."""
    text = "" if value is None else str(value)
    return _PREFIX + text if _reads_as_formula(text) else text


def restore_cell(text: str) -> str:
    """The value :func:`neutralise_cell` was given, from the cell it wrote."""
    if text.startswith(_PREFIX) and _reads_as_formula(text):
        return text[len(_PREFIX) :]
    return text
