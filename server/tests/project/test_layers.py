"""The packages of ``commerce_api`` form layers, and every import points down them.

A module may import its own package and any package in a lower layer, never one in its own
layer or above: so no two packages import each other, directly or through others (no cycles),
and the README's Layout section stays true. Imports under ``if TYPE_CHECKING:`` count too: a
type named only for an annotation is a dependency all the same (the HTTP layer knows the
services it hands the routes by protocols of its own, ``http.services``; the container that
has them is assembled in ``app.services``).
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

# Lowest first. A package may import the packages of the layers below its own.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("settings",),
    ("storage",),
    ("observability",),
    ("ratelimit", "accounts", "idempotency"),
    ("http",),
    ("audit",),
    ("catalog",),
    ("readpath", "webhooks"),
    ("events",),
    ("orders",),
    ("console",),
    ("app",),
    ("demo",),
    ("cli",),
)
RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("commerce_api", exclude_type_checking_imports=False, cache_dir=None)


def _part(module: str) -> str:
    """The top-level package (or loose module) of ``commerce_api`` a module belongs to."""
    return module.split(".")[1] if module.count(".") else ""


def test_every_package_has_a_layer(graph: grimp.ImportGraph) -> None:
    parts = {_part(module) for module in graph.modules} - {""}
    assert parts - RANK.keys() == set(), "add the new package to LAYERS (and to the README)"


def test_imports_point_down_the_layers(graph: grimp.ImportGraph) -> None:
    upward = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            source, target = _part(module), _part(imported)
            if "" in (source, target) or source == target:
                continue
            if RANK[target] >= RANK[source]:
                upward.append(f"{module} -> {imported}")
    assert upward == []


def test_there_are_at_most_six_loose_modules(graph: grimp.ImportGraph) -> None:
    loose = [m for m in graph.find_children("commerce_api") if not graph.find_children(m)]
    assert len(loose) <= 6, loose


def test_every_package_has_its_tests_in_a_folder_of_the_same_name(
    graph: grimp.ImportGraph,
) -> None:
    tests = Path(__file__).resolve().parents[1]
    packages = {
        m.split(".")[1] for m in graph.find_children("commerce_api") if graph.find_children(m)
    }
    missing = sorted(p for p in packages if not any((tests / p).glob("test_*.py")))
    assert missing == []


# The request edge: the kit (``http``), FastAPI and Starlette.
EDGE = ("commerce_api.http", "fastapi", "starlette")
# What a domain's ``schemas.py`` may take from the kit: the models every resource shares.
SHARED_MODELS = "commerce_api.http.schemas"


def _is_edge(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in EDGE)


def _may_import_the_edge(module: str) -> bool:
    """The route modules (each domain's ``routes.py``, anything under ``console``), ``app``,
    and the kit itself."""
    part = _part(module)
    return part in {"http", "app", "console"} or module.rsplit(".", 1)[-1] == "routes"


def test_only_route_modules_and_app_import_http_fastapi_or_starlette() -> None:
    """A domain is free of HTTP: its services return values and raise domain errors, and its
    ``routes.py`` renders them. A ``schemas.py`` may build on the kit's shared models."""
    graph = grimp.build_graph(
        "commerce_api", "fastapi", "starlette", exclude_type_checking_imports=False, cache_dir=None
    )
    reaching = []
    for module in sorted(m for m in graph.modules if m.startswith("commerce_api")):
        if _may_import_the_edge(module):
            continue
        schemas = module.rsplit(".", 1)[-1] == "schemas"
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if _is_edge(imported) and not (schemas and imported == SHARED_MODELS):
                reaching.append(f"{module} -> {imported}")
    assert reaching == []
