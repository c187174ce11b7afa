"""Docs, comments and file names say what is true now: no numbered work periods ("stop 36",
"round 3", "session 2") — history lives in git and in the issue notes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLACES = ("server/src", "client/src", "client-ts/src", "bench", "docs", "deploy", "README.md")
# "stop 36's machine", "round 3", "(session 2)"; not an option such as ``--rounds 1``.
DIARY = re.compile(r"(?<![-\w])(stop|round|session|period)s? #?\d+\b", re.IGNORECASE)


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", *PLACES], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [name for name in out.stdout.splitlines() if not name.endswith(".png")]


def test_no_numbered_work_period_in_docs_comments_or_file_names() -> None:
    found = []
    for name in _tracked():
        if DIARY.search(name):
            found.append(name)
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if DIARY.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "numbered work periods (history belongs in git):\n" + "\n".join(found)
