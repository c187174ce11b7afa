"""The README's first example as a newcomer runs it: ``make serve`` (here the same
``serve --demo`` on a free port), the README's ``export COMMERCE_BASE_URL=…``, then its first
Python block, unedited but for the printed key in place of ``sk_sandbox_…``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from client_e2e_server import serve_demo

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "client" / "README.md"
KEY_PLACEHOLDER = '"sk_sandbox_…"'
DEMO_BOOKS = 10  # the demo catalogue's books (commerce_api.demo)
EXAMPLE_TIMEOUT_SECONDS = 60


def first_block(markdown: str, language: str) -> str:
    """The first fenced block of ``language`` that starts a line (not an indented one)."""
    match = re.search(rf"^```{language}\n(.*?)^```$", markdown, re.MULTILINE | re.DOTALL)
    assert match is not None, f"no ```{language} block in {README}"
    return match.group(1)


def make_serve_port() -> str:
    match = re.search(r"^PORT \?= (\d+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match is not None, "the Makefile has no default PORT"
    return match.group(1)


def test_the_first_example_runs_against_make_serve_as_printed(tmp_path: Path) -> None:
    readme = README.read_text(encoding="utf-8")
    shell = first_block(readme, "sh")
    example = first_block(readme, "python")
    assert readme.index(shell) < readme.index(example), "the export comes before the example"
    [exported] = re.findall(r"^export COMMERCE_BASE_URL=(\S+)$", shell, re.MULTILINE)
    assert example.count(KEY_PLACEHOLDER) == 1, f"the example has one {KEY_PLACEHOLDER}"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}

    with serve_demo(tmp_path) as server:
        # The README's URL is the one `make serve` prints, on its port.
        port = make_serve_port()
        assert exported == re.sub(r":\d+/v1$", f":{port}/v1", server.printed_base_url)
        run = subprocess.run(
            [sys.executable, "-c", example.replace(KEY_PLACEHOLDER, repr(server.key))],
            cwd=tmp_path,
            env=environ | {"COMMERCE_BASE_URL": server.printed_base_url},
            capture_output=True,
            text=True,
            timeout=EXAMPLE_TIMEOUT_SECONDS,
            check=False,
        )

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == DEMO_BOOKS, run.stdout
    assert all(re.fullmatch(r"prod_\w+ .+ \d+\.\d\d", line) for line in lines), run.stdout
