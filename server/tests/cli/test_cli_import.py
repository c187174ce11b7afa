"""`commerce-api products import` as an operator runs it: a bad file changes nothing and says
where; the summary line when its output is not a terminal; the progress bar when it is."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from sqlalchemy import select

from commerce_api.catalog.import_file import ImportFile
from commerce_api.catalog.import_report import ImportReport
from commerce_api.storage.tables import audit_events, products
from tests.cli.test_cli import Cli, query

CSV = "name,description,price,category,inventory_count\n"


@pytest.fixture
def cli(database_url: str, tmp_path: Path, pycache: Path) -> Cli:
    """The CLI on a clean, migrated database of each backend."""
    return Cli(database_url, tmp_path, pycache)


async def test_a_bad_file_changes_nothing_and_names_line_and_column(cli: Cli) -> None:
    bad = cli.workdir / "bad.csv"
    bad.write_text(
        CSV + 'Lamp,"Warm, bright",19.99,home,5\nDesk,Oak,120,office,2\nPen,Blue,cheap,office,9\n',
        encoding="utf-8",
    )
    failed = await cli.run("products", "import", str(bad))
    assert failed.returncode == 1
    assert failed.stderr.strip() == (
        f"Error: {bad}: line 4, column price: must be a number, such as 19.99; nothing was imported"
    )
    assert await query(cli.database_url, select(products)) == []
    assert await query(cli.database_url, select(audit_events)) == []


async def test_the_summary_line_when_stderr_is_not_a_terminal(cli: Cli) -> None:
    good = cli.workdir / "good.csv"
    good.write_text(CSV + "Lamp,Warm,19.99,home,5\nDesk,Oak,120,office,2\n", encoding="utf-8")
    imported = (await cli.run("products", "import", str(good))).ok()
    assert imported.last_line == "created=2 updated=0"
    assert re.fullmatch(
        r"Imported 2 products \(2 created, 0 updated\) in \d+\.\d s\n", imported.stderr
    ), imported.stderr
    assert len(await query(cli.database_url, select(products))) == 2


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text(CSV + "Lamp,Warm,19.99,home,5\n" * 10, encoding="utf-8")
    terminal, pipe = Terminal(), io.StringIO()
    with (
        ImportFile(path) as source,
        ImportReport(source, terminal) as report,
        ImportReport(source, pipe) as quiet,
    ):
        list(source.records())
        report.rows(1234)
        quiet.rows(1234)
    shown = terminal.getvalue()
    assert "1,234 rows" in shown
    assert "rows/s" in shown
    assert "left" in shown
    assert pipe.getvalue() == ""
