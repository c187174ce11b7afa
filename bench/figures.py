"""The table of current figures in ``docs/performance.md``, rendered from a ``make bench`` result.

``make bench`` (``bench/run.py``) rewrites the table between the two markers below once a run
written to ``bench/results/latest.json`` (the default ``--output``) ends.
``python bench/figures.py [RESULT.json]`` renders it again from a committed result.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
LATEST = ROOT / "bench" / "results" / "latest.json"
BEGIN = "<!-- figures: written by make bench (bench/figures.py) -->"
END = "<!-- end of figures -->"
BACKENDS = {"sqlite": "SQLite", "postgresql": "PostgreSQL + Redis"}


def machine() -> str:
    """The CPU model and count, as /proc/cpuinfo names them (the architecture elsewhere)."""
    model = platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} CPUs, {model}"


def render(result: dict[str, Any]) -> str:
    """The table: one row a scenario and catalogue size, per backend req/s, p99 and ratios."""
    args = result["args"]
    measured = [
        s
        for s in result["scenarios"]
        if not s["name"].startswith(("ceiling:", "before:")) and s["backend"] in BACKENDS
    ]
    backends = [b for b in BACKENDS if any(s["backend"] == b for s in measured)]
    before = bool(args.get("baseline"))
    rows: dict[tuple[int, str], dict[str, dict[str, Any]]] = {}
    for s in measured:
        rows.setdefault((s["products"], s["name"]), {})[s["backend"]] = s
    per_backend = "req/s | p99 ms | x ceiling |" + (" x before |" if before else "")
    taken = (
        f"Taken {args.get('date') or 'on a date not recorded'}"
        f" at commit {args.get('commit') or '(not recorded)'}"
        f" on {args.get('machine') or 'a machine not recorded'}"
        f"; CPython {result['interpreter'].split()[0]}"
        f"; {args['rounds']} rounds × {args['duration']} s, medians"
    )
    if before:
        taken += f"; before: the code at {args.get('baseline_commit') or args['baseline']}"
    lines = [
        taken + " (`bench/results/latest.md` has every column).",
        "",
        "| products | scenario | " + " ".join(f"{BACKENDS[b]} {per_backend}" for b in backends),
        "|---|---|" + "---|---|---|" * len(backends) + "---|" * len(backends) * before,
    ]
    for (products, name), by_backend in rows.items():
        cells = []
        for backend in backends:
            s = by_backend.get(backend)
            if s is None:
                cells.append(" | | |" + (" |" if before else ""))
                continue
            values = [
                f"{_median(s, 'requests_per_second'):,.0f}",
                f"{_median(s, 'p99_ms'):.1f}" if _median(s, "p99_ms") else "",
                _ratio(s.get("ratio_to_ceiling")),
            ]
            if before:
                values.append(_ratio(s.get("ratio_to_before")))
            cells.append(" " + " | ".join(values) + " |")
        lines.append(f"| {products:,} | {name} |" + "".join(cells))
    return "\n".join(lines)


def _median(scenario: dict[str, Any], field: str) -> float:
    return float(statistics.median(run[field] for run in scenario["runs"]))


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def update(result_path: Path = LATEST, doc: Path = DOC) -> None:
    """Replace the table between the markers in ``doc`` with the one ``result_path`` gives."""
    text = doc.read_text(encoding="utf-8")
    head, found, rest = text.partition(BEGIN)
    _, ended, tail = rest.partition(END)
    if not (found and ended):
        raise SystemExit(f"{doc}: the figures' markers are missing ({BEGIN} … {END})")
    table = render(json.loads(result_path.read_text(encoding="utf-8")))
    doc.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("result", nargs="?", type=Path, default=LATEST)
    update(parser.parse_args().result)


if __name__ == "__main__":
    main()
