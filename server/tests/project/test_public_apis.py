"""The project's code uses its dependencies through their public interfaces only.

A private module or name (a leading underscore anywhere in a dependency's dotted path), an
attribute a dependency does not document, a ``__class__`` swap, the parsing of names a library
generates and the reading of SQLite's own files are how a dependency's patch release breaks a
user's shop without a test of ours failing first. This test reads the source (``ast``) and names
the file and line of each.

What "not documented" means is not something a scan can decide in general, so the attributes
and modules known to be internal (the ones this project once used) are listed by name below;
the underscore rule catches the rest: a private name imported from a dependency, a private
attribute of a dependency's module, and a private attribute of any object (``x._name``, a
parameter's, a local's) when the code base defines no ``_name`` of its own and ``x`` is not
``self`` or ``cls`` — an object of a dependency's type, then (prometheus-client's
``histogram._sum``, say).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("server/src", "client/src", "bench")
OWN_PACKAGES = {"commerce_api", "commerce_client", "tests", "bench"}

# Attributes that are a dependency's internal structures, not its documented interface.
INTERNAL_ATTRIBUTES = {
    "dependant": "FastAPI's internal dependency tree of a route",
    "ModelField": "FastAPI's private pydantic compatibility layer",
    "path_regex": "Starlette's compiled route pattern (undocumented)",
    "param_convertors": "Starlette's route convertors (undocumented)",
}
# Documented attributes that start with an underscore (so as not to clash with the fields or
# columns they sit beside): public, whatever the underscore rule says.
DOCUMENTED_UNDERSCORED = {
    "_mapping": "SQLAlchemy's Row._mapping, the row as a mapping by column name",
    "_replace": "a namedtuple's _replace",
    "_asdict": "a namedtuple's _asdict",
    "_fields": "a namedtuple's _fields",
}
# Modules that are a dependency's internals even without an underscore.
INTERNAL_MODULES = {
    "uvicorn.protocols": "uvicorn's protocol classes are not an interface to subclass",
    "fastapi.dependencies": "FastAPI's dependency-resolution internals",
}
# SQLite's files other than the database itself: their format is not an interface.
SQLITE_FILE_SUFFIXES = ("-shm", "-wal")
NAME_PARSERS = {"split", "rsplit", "partition", "rpartition"}


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _foreign(module: str) -> bool:
    return module.split(".")[0] not in OWN_PACKAGES and module != "__future__"


def own_private_names(sources: list[str]) -> frozenset[str]:
    """The private names our code defines: functions, classes, variables, attributes it
    assigns, parameters, import aliases and ``__slots__`` entries."""
    names: set[str] = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.id if isinstance(node, ast.Name) else node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias) and node.asname:
                names.add(node.asname)
            elif (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
                and isinstance(node.value, ast.Tuple | ast.List)
            ):
                names |= {
                    e.value
                    for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
    return frozenset(name for name in names if _private(name))


def violations(
    source: str, filename: str = "<source>", own: frozenset[str] | None = None
) -> Iterator[str]:
    """Each use of a dependency's internals in ``source``, as ``file:line: what``. ``own``:
    the private names the code base defines (:func:`own_private_names`; by default,
    ``source``'s own)."""
    tree = ast.parse(source, filename)
    if own is None:
        own = own_private_names([source])
    foreign_names: set[str] = set()  # local names bound to a dependency's module or object

    def at(node: ast.AST, what: str) -> str:
        return f"{filename}:{getattr(node, 'lineno', 0)}: {what}"

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _foreign(alias.name):
                    continue
                foreign_names.add((alias.asname or alias.name).split(".")[0])
                yield from _module_problems(node, alias.name, at)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not _foreign(node.module):
                continue
            yield from _module_problems(node, node.module, at)
            for alias in node.names:
                foreign_names.add(alias.asname or alias.name)
                if _private(alias.name):
                    yield at(node, f"private name {alias.name!r} imported from {node.module}")
                if alias.name in INTERNAL_ATTRIBUTES:
                    yield at(node, f"{alias.name}: {INTERNAL_ATTRIBUTES[alias.name]}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in INTERNAL_ATTRIBUTES:
                yield at(node, f".{node.attr}: {INTERNAL_ATTRIBUTES[node.attr]}")
            elif (
                _private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id in foreign_names
            ):
                yield at(node, f"private attribute {node.value.id}.{node.attr}")
            elif (
                _private(node.attr)
                and node.attr not in own
                and node.attr not in DOCUMENTED_UNDERSCORED
                and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
            ):
                yield at(node, f"private attribute .{node.attr} of an object not of our types")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "__class__":
                    yield at(node, "__class__ assignment (a runtime class swap)")
        elif isinstance(node, ast.Call):
            if (
                isinstance(node.func, ast.Name)
                and node.func.id == "setattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "__class__"
            ):
                yield at(node, "__class__ assignment (a runtime class swap)")
            if (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in NAME_PARSERS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value.startswith("_")
                and len(node.args[0].value) > 1
            ):
                yield at(node, f"parses a generated name at {node.args[0].value!r}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # Also the tail of an f-string: ast.walk visits its constant parts.
            for suffix in SQLITE_FILE_SUFFIXES:
                if node.value.endswith(suffix):
                    yield at(node, f"opens SQLite's {suffix!r} file, whose format is internal")


def _module_problems(node: ast.AST, module: str, at: object) -> Iterator[str]:
    assert callable(at)
    if any(_private(part) for part in module.split(".")):
        yield at(node, f"private module {module}")
    for internal, why in INTERNAL_MODULES.items():
        if module == internal or module.startswith(internal + "."):
            yield at(node, f"{module}: {why}")


def _sources() -> list[Path]:
    return sorted(path for folder in SCANNED for path in (ROOT / folder).rglob("*.py"))


def test_the_project_uses_public_interfaces_only() -> None:
    sources = {path: path.read_text() for path in _sources()}
    own = own_private_names(list(sources.values()))
    found = [
        problem
        for path, source in sources.items()
        for problem in violations(source, str(path.relative_to(ROOT)), own)
    ]
    assert not found, "internals of a dependency in use:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol", "uvicorn's"),
        ("import starlette._utils", "private module starlette._utils"),
        ("from fastapi._compat import Undefined", "private module fastapi._compat"),
        ("from pydantic import _internal", "private name '_internal'"),
        ("def f(route):\n    return route.dependant", ".dependant"),
        ("def f(route):\n    return route.path_regex.match('/')", ".path_regex"),
        ("import sqlalchemy\nsqlalchemy._hidden", "private attribute sqlalchemy._hidden"),
        ("def f(cycle, C):\n    cycle.__class__ = C", "__class__ assignment"),
        ("def f(c, C):\n    setattr(c, '__class__', C)", "__class__ assignment"),
        ("def f(bind):\n    return bind.rpartition('_m')", "parses a generated name"),
        ("def f(path):\n    return open(f'{path}-shm')", "'-shm'"),
        ("SHM = 'db.sqlite-wal'", "'-wal'"),
        ("def f(histogram):\n    histogram._sum.inc(1)", "private attribute ._sum"),
        ("def f(h):\n    return h.labels('a')._upper_bounds", "private attribute ._upper_bounds"),
    ],
)
def test_each_kind_of_internal_is_named_with_its_line(source: str, what: str) -> None:
    (problem,) = violations(source, "example.py")
    assert problem.startswith(f"example.py:{source.count(chr(10)) + 1}:")
    assert what in problem


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations",
        "from commerce_api.core import _private_helper",
        "import fastapi\nfastapi.__version__",
        "def f(self):\n    return self._own",
        "from starlette.routing import Route\nRoute.endpoint",
        "def f(name):\n    return name.split('_')",
        "class A:\n    _cached = 1\n\ndef f(a):\n    return a._cached",
        "class B:\n    __slots__ = ('_n',)\n\ndef f(b):\n    return b._n",
        "def f(cls):\n    return cls._registry",
        "def f(row):\n    return row._mapping",
    ],
)
def test_own_and_public_names_pass(source: str) -> None:
    assert list(violations(source, "example.py")) == []
