"""No source module of the service passes 300 lines.

Past ~300 lines a module is usually two concepts (Starlette's modules rarely pass it): split it
by concept, as console/pages/, webhooks/repository/, storage/tables/ and readpath/ were.
"""

from __future__ import annotations

from pathlib import Path

import commerce_api

MAX_LINES = 300
PACKAGE = Path(commerce_api.__file__).resolve().parent


def test_no_module_passes_300_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    over = {name: lines for name, lines in sorted(sizes.items()) if lines > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"
