"""``cli.tables``: a header row over columns that line up, without a process."""

from __future__ import annotations

import json

import pytest

from commerce_api.cli.tables import echo_listing, render_table


def test_columns_are_as_wide_as_their_widest_cell_and_lines_end_without_spaces() -> None:
    rendered = render_table(["ID", "NAME", "TIER"], [["acct_1", "Acme Books", "production"]])
    assert rendered.splitlines() == [
        "ID      NAME        TIER",
        "acct_1  Acme Books  production",
    ]


def test_an_empty_listing_is_its_header() -> None:
    assert render_table(["ID", "NAME"], []) == "ID  NAME"


def test_json_carries_every_field_and_the_table_only_its_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    records = [{"id": "key_1", "last4": "abcd", "revoked_at": None}]
    columns = {"ID": lambda r: r["id"], "KEY": lambda r: f"sk_…{r['last4']}"}
    echo_listing(records, columns, as_json=True)
    assert json.loads(capsys.readouterr().out) == records
    echo_listing(records, columns, as_json=False)
    assert capsys.readouterr().out.splitlines() == ["ID     KEY", "key_1  sk_…abcd"]
