"""docs/performance.md shows the figures of the committed ``make bench`` result.

``bench/figures.py`` writes the table between its markers from ``bench/results/latest.json``;
a result committed without the table written again (or a table edited by hand) fails here.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_figures", ROOT / "bench" / "figures.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_figures_table_is_the_latest_results() -> None:
    figures = _figures()
    table = figures.render(json.loads((ROOT / "bench/results/latest.json").read_text()))
    doc = (ROOT / "docs/performance.md").read_text(encoding="utf-8")
    assert f"{figures.BEGIN}\n{table}\n{figures.END}" in doc


def test_the_table_names_date_commit_and_machine() -> None:
    table = _figures().render(json.loads((ROOT / "bench/results/latest.json").read_text()))
    first = table.splitlines()[0]
    assert "not recorded" not in first.split(" on ")[0], first  # a date and a commit
    assert first.startswith("Taken 20")
    assert " at commit " in first
