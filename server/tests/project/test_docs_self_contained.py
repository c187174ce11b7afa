"""The repository is self-contained: its documents are in ``docs/`` and nothing points outside it.

A clone must not depend on a sibling checkout: the specification, the design contract, the
style guide and the performance baseline are ``docs/*.md``, and no tracked file refers to
the sibling ``shared`` folder where they were kept before.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUTSIDE = "../" + "shared"  # spelled in two parts so that this file does not match itself
DOCUMENTS = ("specification.md", "design.md", "style.md", "performance-baseline.md")
LINK = re.compile(r"\]\(((?!https?://|#|mailto:)[^)#\s]+)")


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    paths = [ROOT / name for name in listed.split("\0") if name]
    return [p for p in paths if p.suffix in {".md", ".py", ".toml", ".ts", ".json", ".yml", ".cfg"}]


def test_the_contract_documents_are_in_docs() -> None:
    for name in DOCUMENTS:
        assert (ROOT / "docs" / name).stat().st_size > 1000, name


def test_no_tracked_file_refers_outside_the_repository() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in _tracked_text_files()
        if path.exists() and OUTSIDE in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert offenders == []


def test_relative_links_in_the_readme_and_docs_resolve() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [
        f"{page.relative_to(ROOT)} -> {target}"
        for page in pages
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if not (page.parent / target).exists()
    ]
    assert broken == []
