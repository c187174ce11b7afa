"""The everyday commands start without the server: they never import the web framework, the
HTTP server, the service's HTTP layers or the operator console (nor alembic, on a database
already migrated), whose imports took most of a command's start. The commands on accounts and
keys, and ``migrate`` at head, open the database without the async engine either
(``storage.direct``): it imports SQLAlchemy's ORM, which took longer than the rest of them.

Each command runs in a process of its own, as the console script runs it, against a migrated
database of each backend; the process then writes the names of every module it imported. No
timing here: how long the commands take is measured side by side, outside the tests
(``bench/cli_start.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# What the server needs and no operator's command should pay for.
SERVER_MODULES = (
    "fastapi",
    "starlette",
    "granian",
    "commerce_api.app",
    "commerce_api.http",
    "commerce_api.console",
)

# What the async engine brings (``sqlalchemy.ext.asyncio`` imports the ORM; greenlet runs its
# driver calls; aiosqlite is its SQLite driver), and the settings library the settings no longer
# use: none of it is needed to list or issue keys.
ASYNC_ENGINE_MODULES = (
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.orm",
    "greenlet",
    "aiosqlite",
    "pydantic_settings",
)

# Runs the command as the `commerce-api` script does, then writes sys.modules to the file
# named by its first argument (click ends every command with SystemExit).
WRAPPER = """
import json, sys
from commerce_api.cli import main
try:
    main(sys.argv[2:], prog_name="commerce-api")
finally:
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's processes' working directory (no stray .env file is read there), with
    their database and their compiled imports."""
    return tmp_path_factory.mktemp("cli-imports")


def imported_by(database_url: str, run_dir: Path, *command: str) -> list[str]:
    """The modules ``commerce-api COMMAND`` imported, run in a process of its own."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("COMMERCE_")}
    env["COMMERCE_DATABASE_URL"] = database_url
    # Compile the imports once for all the processes of the module, outside the venv.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(run_dir / "pycache")
    modules_file = run_dir / "modules.json"
    finished = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(modules_file), *command],
        cwd=run_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, f"{command} exited {finished.returncode}: {finished.stderr}"
    modules = json.loads(modules_file.read_text())
    assert isinstance(modules, list)
    return modules


def among(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The modules that are one of ``packages`` or inside one."""
    return [m for m in modules if any(m == p or m.startswith(f"{p}.") for p in packages)]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def migrated_database(request: pytest.FixtureRequest, run_dir: Path) -> str:
    if request.param == "postgresql":
        url: str = request.getfixturevalue("postgres_url")  # migrated
        return url
    url = f"sqlite:///{run_dir / 'cli.db'}"
    imported_by(url, run_dir, "migrate")
    return url


@pytest.mark.parametrize(
    "command",
    [
        ("--help",),
        ("keys", "list"),
        ("keys", "list", "--json"),
        ("accounts", "list"),
        ("accounts", "list", "--json"),
        ("keys", "create", "--admin"),
        ("migrate",),
    ],
    ids=" ".join,
)
def test_commands_import_neither_the_server_nor_alembic(
    migrated_database: str, run_dir: Path, command: tuple[str, ...]
) -> None:
    modules = imported_by(migrated_database, run_dir, *command)
    assert "click" in modules  # the list is the command's own
    assert among(modules, (*SERVER_MODULES, "alembic")) == []


@pytest.mark.parametrize(
    "command",
    [
        ("keys", "list"),
        ("accounts", "list", "--json"),
        ("accounts", "create", "Imports Ltd"),
        ("keys", "create", "--admin"),
        ("migrate",),
    ],
    ids=" ".join,
)
def test_commands_on_keys_and_accounts_import_neither_the_orm_nor_the_async_engine(
    migrated_database: str, run_dir: Path, command: tuple[str, ...]
) -> None:
    modules = imported_by(migrated_database, run_dir, *command)
    assert "sqlalchemy" in modules  # the database was opened: Core only
    assert among(modules, ASYNC_ENGINE_MODULES) == []


def test_listing_keys_imports_the_storage_layer_only(migrated_database: str, run_dir: Path) -> None:
    modules = imported_by(migrated_database, run_dir, "keys", "list")
    assert "commerce_api.accounts.service" in modules
    assert "sqlalchemy" in modules
    assert among(modules, SERVER_MODULES) == []


def test_migrate_on_a_new_database_imports_alembic_but_not_the_server(run_dir: Path) -> None:
    modules = imported_by(f"sqlite:///{run_dir / 'new.db'}", run_dir, "migrate")
    assert "alembic" in modules
    assert among(modules, SERVER_MODULES) == []
