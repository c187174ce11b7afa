"""The packages we ship admit each dependency's next releases up to its next major.

An upper bound below the next major (``<0.55`` on a 0.54 release, ``<2.2`` on 2.0) is a pin: no
fix of theirs, security fixes included, reaches a user until we move it. We take upgrades the
other way round: open ranges, and ``make test-latest`` (in CI) runs the suite on the newest
releases they admit, so a breaking one is found by us first.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ("server/pyproject.toml", "client/pyproject.toml")
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _locked() -> dict[str, tuple[int, ...]]:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return {
        package["name"].lower().replace("_", "-"): _version(package["version"])
        for package in lock["package"]
        if "version" in package
    }


def _requirements() -> list[tuple[str, str, str]]:
    found = []
    for manifest in SHIPPED:
        project = tomllib.loads((ROOT / manifest).read_text())["project"]
        for requirement in project.get("dependencies", []):
            match = REQUIREMENT.match(requirement.split(";")[0])
            assert match is not None, requirement
            name, _extras, spec = match.groups()
            found.append((manifest, name.lower().replace("_", "-"), spec))
    return found


def upper_bound_problem(spec: str, locked: tuple[int, ...]) -> str | None:
    """Why ``spec`` shuts out releases before the next major of ``locked``; None if it does not."""
    for clause in filter(None, (part.strip() for part in spec.split(","))):
        if clause.startswith("=="):
            return f"{clause} pins one release"
        if clause.startswith("~="):
            return f"{clause} shuts out the next minor"
        if clause.startswith("<="):
            return f"{clause} shuts out the next release"
        if clause.startswith("<"):
            bound = _version(clause[1:])
            next_major = (locked[0] + 1,)
            if bound < next_major:
                return f"{clause} is below the next major of {'.'.join(map(str, locked))}"
    return None


@pytest.mark.parametrize(("manifest", "name", "spec"), _requirements())
def test_no_shipped_dependency_is_capped_below_its_next_major(
    manifest: str, name: str, spec: str
) -> None:
    locked = _locked()
    assert name in locked, f"{name} ({manifest}) is not in uv.lock"
    problem = upper_bound_problem(spec, locked[name])
    assert problem is None, f"{manifest}: {name}{spec}: {problem}"


@pytest.mark.parametrize(
    ("spec", "locked", "refused"),
    [
        (">=0.54,<0.55", (0, 54, 2), True),
        (">=2.0.40,<2.2", (2, 0, 44), True),
        (">=5.2,<8", (8, 1, 0), True),
        ("==1.2.3", (1, 2, 3), True),
        ("~=1.2", (1, 2, 3), True),
        (">=0.120,<1", (0, 123, 0), False),
        (">=2.0.40,<3", (2, 0, 44), False),
        (">=43", (46, 0, 0), False),
        ("", (1, 0, 0), False),
    ],
)
def test_the_rule_refuses_caps_below_the_next_major(
    spec: str, locked: tuple[int, ...], refused: bool
) -> None:
    assert (upper_bound_problem(spec, locked) is not None) is refused
