"""SQL lives in repositories: a ``*repository*`` module (or a ``repository/`` package) of its
domain, or ``storage/`` (the database's plumbing and its migrations).

A statement anywhere else — a route, a service, the metrics, the read path — is a second place a
table's shape is spelled, which a change of that table misses. The test reads the source
(``ast``) and names the file and line of each: a call of SQLAlchemy's statement builders (or of
``storage.bulk.dialect_insert``), a ``Table.insert()``/``update()``/``delete()``/``select()``,
``exec_driver_sql``, ``text(...)``, and a string that starts a statement (``"SELECT …"``,
``"INSERT …"``). A module that only compiles or runs a repository's statements (the read path's
``statements.py``) has none of these. Transaction control on a driver's own connection
(``BEGIN``, ``COMMIT``, a ``PRAGMA``) is not a table's SQL and is not looked for.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import commerce_api

PACKAGE = Path(commerce_api.__file__).resolve().parent

# Modules allowed SQL outside the repositories, each with its reason. Keep it short.
EXCEPTIONS: dict[str, str] = {}

# SQLAlchemy's statement builders (imported from ``sqlalchemy`` or a dialect of it).
BUILDERS = {"select", "insert", "update", "delete", "text", "union", "union_all", "exists"}
OWN_BUILDERS = {"dialect_insert"}  # storage/bulk.py's ``insert`` with ``ON CONFLICT``
TABLE_METHODS = {"select", "insert", "update", "delete"}  # ``table.insert()`` and the like
STATEMENT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\s")


def _allowed_anyway(relative: Path) -> bool:
    return relative.parts[0] == "storage" or any("repository" in part for part in relative.parts)


def violations(source: str, filename: str = "<source>") -> Iterator[str]:
    """Each place ``source`` writes SQL, as ``file:line: what``."""
    tree = ast.parse(source, filename)
    builders: set[str] = set()  # local names bound to a statement builder
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            ours = BUILDERS if node.module.split(".")[0] == "sqlalchemy" else OWN_BUILDERS
            builders |= {alias.asname or alias.name for alias in node.names if alias.name in ours}

    def at(node: ast.AST, what: str) -> str:
        return f"{filename}:{getattr(node, 'lineno', 0)}: {what}"

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in builders:
                yield at(node, f"{func.id}(…) builds a statement")
            elif isinstance(func, ast.Attribute):
                if func.attr == "exec_driver_sql":
                    yield at(node, "exec_driver_sql(…) runs SQL")
                elif (
                    isinstance(func.value, ast.Name)
                    and func.value.id in {"sqlalchemy", "sa"}
                    and func.attr in BUILDERS
                ):
                    yield at(node, f"sqlalchemy.{func.attr}(…) builds a statement")
                elif func.attr in TABLE_METHODS and not node.args and not node.keywords:
                    yield at(node, f".{func.attr}() builds a statement on a table")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and STATEMENT.match(node.value)
        ):
            yield at(node, f"SQL in a string: {node.value.strip()[:40]!r}")


def _modules() -> list[Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if not _allowed_anyway(path.relative_to(PACKAGE))
        and str(path.relative_to(PACKAGE)) not in EXCEPTIONS
    )


def test_sql_is_written_only_in_repositories_and_storage() -> None:
    found = [
        problem
        for path in _modules()
        for problem in violations(path.read_text(), str(path.relative_to(PACKAGE)))
    ]
    assert not found, "SQL outside a repository (move it to the domain's repository):\n" + (
        "\n".join(found)
    )


def test_each_exception_names_a_module_that_exists() -> None:
    assert [name for name in EXCEPTIONS if not (PACKAGE / name).is_file()] == []


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("from sqlalchemy import select\nselect(t)", "select(…)"),
        ("from sqlalchemy import delete as d\nd(t)", "d(…)"),
        ("from sqlalchemy.dialects.postgresql import insert\ninsert(t)", "insert(…)"),
        ("from sqlalchemy import text\ntext('x')", "text(…)"),
        ("import sqlalchemy\nsqlalchemy.update(t)", "sqlalchemy.update(…)"),
        ("from commerce_api.storage.bulk import dialect_insert\ndialect_insert(c)(t)", "dialect"),
        ("def f(conn):\n    return conn.exec_driver_sql('SAVEPOINT a')", "exec_driver_sql"),
        ("def f(table):\n    return table.insert()", ".insert()"),
        ("Q = 'SELECT id FROM products WHERE id = ?'", "SQL in a string"),
        ("Q = '  INSERT INTO t VALUES (1)'", "SQL in a string"),
    ],
)
def test_each_kind_of_sql_is_named_with_its_line(source: str, what: str) -> None:
    (problem,) = violations(source, "example.py")
    assert problem.startswith(f"example.py:{source.count(chr(10)) + 1}:")
    assert what in problem


@pytest.mark.parametrize(
    "source",
    [
        "def f(row, more):\n    row.update(more)",
        "def f(items, x):\n    items.insert(0, x)",
        "def f(conn):\n    conn.execute('BEGIN')",
        "def f(ids, slot):\n    return ids.text(slot)",
        "from sqlalchemy import Table\nTable('t', m)",
        "MESSAGE = 'Select a product first.'",
        "from commerce_api.catalog import repository\nrepository.select_page(1)",
    ],
)
def test_plain_python_passes(source: str) -> None:
    assert list(violations(source, "example.py")) == []
