"""The everyday commands start without the server: they never import the web framework, the
HTTP server, the service's HTTP layers or the operator console (nor alembic, on a database
already migrated), whose imports took most of a command's start; nor does the worker. The
operator's commands (accounts, keys, products, orders, and ``migrate`` at head) open the
database without the async engine either (``storage.direct``): it imports SQLAlchemy's ORM,
which took longer than the rest of them.

Each command runs in a process of its own, as the console script runs it, against a migrated
database of each backend; the process then writes the names of every module it imported. No
timing here: how long the commands take is measured side by side, outside the tests
(``bench/cli_start.py``).
"""

from __future__ import annotations

import json
import os
import select
import signal
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

# The schema pieces every resource's models share (pydantic only, no web framework), which the
# domains' own schemas import: an import checks its records with them, an order its tracking.
SHARED_SCHEMAS = {"commerce_api.http", "commerce_api.http.schemas"}

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

PRODUCTS_FILE = "products.json"

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
    their database, their compiled imports and a file of products to import."""
    run_dir = tmp_path_factory.mktemp("cli-imports")
    product = {"name": "Lamp", "description": "", "price": 10, "category": "home"}
    (run_dir / PRODUCTS_FILE).write_text(json.dumps([{**product, "inventory_count": 3}]))
    return run_dir


# A command that fails as it should: an order that does not exist (after the database is open
# and the order looked for).
EXIT_CODES: dict[tuple[str, ...], int] = {("orders", "fulfill", "ord_unknown"): 1}


def command_env(database_url: str, run_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("COMMERCE_")}
    env["COMMERCE_DATABASE_URL"] = database_url
    # Compile the imports once for all the processes of the module, outside the venv.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(run_dir / "pycache")
    return env


def imported_by(database_url: str, run_dir: Path, *command: str) -> list[str]:
    """The modules ``commerce-api COMMAND`` imported, run in a process of its own."""
    modules_file = run_dir / "modules.json"
    finished = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(modules_file), *command],
        cwd=run_dir,
        env=command_env(database_url, run_dir),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    expected = EXIT_CODES.get(command, 0)
    assert finished.returncode == expected, (
        f"{command} exited {finished.returncode}: {finished.stderr}"
    )
    modules = json.loads(modules_file.read_text())
    assert isinstance(modules, list)
    return modules


def among(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The modules that are one of ``packages`` or inside one."""
    return [m for m in modules if any(m == p or m.startswith(f"{p}.") for p in packages)]


def of_the_server(modules: list[str]) -> list[str]:
    """The modules of the server (``SERVER_MODULES``) among ``modules``, but the shared schema
    pieces, and alembic."""
    return [m for m in among(modules, (*SERVER_MODULES, "alembic")) if m not in SHARED_SCHEMAS]


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
        ("products", "import", PRODUCTS_FILE),
        ("orders", "fulfill", "ord_unknown"),
    ],
    ids=" ".join,
)
def test_commands_import_neither_the_server_nor_alembic(
    migrated_database: str, run_dir: Path, command: tuple[str, ...]
) -> None:
    modules = imported_by(migrated_database, run_dir, *command)
    assert "click" in modules  # the list is the command's own
    assert of_the_server(modules) == []


@pytest.mark.parametrize(
    "command",
    [
        ("keys", "list"),
        ("accounts", "list", "--json"),
        ("accounts", "create", "Imports Ltd"),
        ("keys", "create", "--admin"),
        ("migrate",),
        ("products", "import", PRODUCTS_FILE),
        ("orders", "fulfill", "ord_unknown"),
    ],
    ids=" ".join,
)
def test_operator_commands_import_neither_the_orm_nor_the_async_engine(
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


def test_the_worker_starts_without_the_server(migrated_database: str, run_dir: Path) -> None:
    """The webhook dispatcher alone imports none of the HTTP side: the modules it imported by
    its start line and until it stopped (on SIGINT, as Ctrl-C stops it)."""
    modules_file = run_dir / "worker-modules.json"
    worker = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, str(modules_file), "worker"],
        cwd=run_dir,
        env=command_env(migrated_database, run_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stderr is not None
    try:
        said = ""
        while "dispatcher running" not in said:
            ready, _, _ = select.select([worker.stderr], [], [], 60)
            assert ready, f"the worker said nothing for 60 s after: {said}"
            line = worker.stderr.readline()
            assert line, f"the worker ended before its start line: {said}"
            said += line
        worker.send_signal(signal.SIGINT)
        assert worker.wait(timeout=60) == 0, worker.stderr.read()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        worker.stderr.close()
    modules = json.loads(modules_file.read_text())
    assert "commerce_api.webhooks.dispatcher" in modules
    assert of_the_server(modules) == []
