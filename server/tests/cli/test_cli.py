"""The ``commerce-api`` command line, run as a real process against both backends.

Each command prints its result (an id or a secret) as the last line of standard output.
Independent invocations run concurrently: every process pays the interpreter's import time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import select, text

from commerce_api.app.serving import METRICS_DIRECTORY_PREFIX, remove_stale_metrics_directories
from commerce_api.storage.db import Database
from commerce_api.storage.migrations import alembic_config, describe
from commerce_api.storage.tables import accounts, api_keys, products
from tests.helpers import head_revision

CLI = Path(sys.prefix) / "bin" / "commerce-api"
if not CLI.exists():  # pragma: no cover - the contract's location, from the repository root
    CLI = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "commerce-api"

KEY_FIELDS = {"id", "account_id", "role", "prefix", "last4", "created_at", "revoked_at"}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def last_line(self) -> str:
        lines = self.stdout.splitlines()
        assert lines, f"no output from {self.args}: {self.stderr}"
        return lines[-1]

    def ok(self) -> Result:
        assert self.returncode == 0, f"{self.args} exited {self.returncode}: {self.stderr}"
        return self


@dataclass(frozen=True)
class Cli:
    database_url: str
    workdir: Path
    pycache: Path

    async def run(self, *args: str, settings: dict[str, str] | None = None) -> Result:
        env = {key: value for key, value in os.environ.items() if not key.startswith("COMMERCE_")}
        env["COMMERCE_DATABASE_URL"] = self.database_url
        env.update(settings or {})
        # Compile the imports once for all the processes, outside the venv (conftest.py).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(self.pycache)
        process = await asyncio.create_subprocess_exec(
            str(CLI),
            *args,
            cwd=self.workdir,  # no stray .env file is read
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
        assert process.returncode is not None
        return Result(args, process.returncode, stdout.decode(), stderr.decode())

    async def run_all(self, *commands: tuple[str, ...]) -> list[Result]:
        return list(await asyncio.gather(*(self.run(*command) for command in commands)))

    async def keys(self) -> list[dict[str, Any]]:
        listed = json.loads((await self.run("keys", "list", "--json")).ok().stdout)
        assert isinstance(listed, list)
        return listed


@pytest.fixture(params=["sqlite", "postgresql"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, pycache: Path) -> Cli:
    """SQLite: a new, empty file; PostgreSQL: the session database, emptied."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'data' / 'cli.db'}"
    else:
        url = request.getfixturevalue("postgresql_database_url")
    return Cli(url, tmp_path, pycache)


@pytest.fixture
def sqlite_cli(tmp_path: Path, pycache: Path) -> Cli:
    return Cli(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path, pycache)


async def query(url: str, statement: Any) -> list[Any]:
    db = Database(url)
    try:
        async with db.read() as conn:
            return list((await conn.execute(statement)).all())
    finally:
        await db.dispose()


def table(stdout: str) -> list[dict[str, str]]:
    """A listing's rows by its header's column names, each cell cut where its column's name
    starts in the header: so the columns must line up under their names, two spaces apart."""
    header, *lines = stdout.splitlines()
    columns = [(match.group(), match.start()) for match in re.finditer(r"\S+", header)]
    bounds: list[tuple[int, int | None]] = [
        (start, next_start) for (_, start), (_, next_start) in pairwise(columns)
    ]
    bounds.append((columns[-1][1], None))
    rows = []
    for line in lines:
        cells = [line[start:end] for start, end in bounds]
        assert all(cell.endswith("  ") for cell in cells[:-1]), line
        rows.append({name: cell.strip() for (name, _), cell in zip(columns, cells, strict=True)})
    return rows


async def test_migrate_names_each_migration_it_applies(
    empty_database_url: str, tmp_path: Path, pycache: Path
) -> None:
    cli = Cli(empty_database_url, tmp_path, pycache)
    scripts = ScriptDirectory.from_config(alembic_config())
    revisions = [script.revision for script in scripts.walk_revisions()][::-1]
    assert revisions[0] == "0001"
    assert revisions[-1] == head_revision()
    applied = [f"Applied {revision}: {describe(revision)}" for revision in revisions]
    assert applied[0] == "Applied 0001: Accounts, API keys and the product catalogue"

    # Two at once: one applies them all, in order; the other, behind the migration lock, finds
    # nothing pending.
    first, second = await cli.run_all(("migrate",), ("migrate",))
    outputs = sorted((first.ok().stdout.splitlines(), second.ok().stdout.splitlines()), key=len)
    assert outputs == [["Database is up to date."], applied]
    assert (await cli.run("migrate")).ok().stdout == "Database is up to date.\n"
    [(version,)] = await query(cli.database_url, text("SELECT version_num FROM alembic_version"))
    assert version == head_revision()


async def test_accounts_list(cli: Cli) -> None:
    empty, empty_json = await cli.run_all(("accounts", "list"), ("accounts", "list", "--json"))
    assert empty.ok().stdout.split() == ["ID", "NAME", "TIER", "CREATED"]
    assert table(empty.stdout) == []
    assert "accounts create" in empty.stderr
    assert json.loads(empty_json.ok().stdout) == []

    shop = (await cli.run("accounts", "create", "Acme Books", "--tier", "production")).ok()
    other = (await cli.run("accounts", "create", "Bob's Bikes")).ok()
    as_text, as_json = await cli.run_all(("accounts", "list"), ("accounts", "list", "--json"))
    assert as_text.ok().stdout.splitlines()[0].split() == ["ID", "NAME", "TIER", "CREATED"]
    listed = json.loads(as_json.ok().stdout)
    assert [set(item) for item in listed] == [{"id", "name", "tier", "created_at"}] * 2
    assert [(item["id"], item["name"], item["tier"]) for item in listed] == [
        (shop.last_line, "Acme Books", "production"),
        (other.last_line, "Bob's Bikes", "development"),
    ]
    assert all(TIMESTAMP.match(item["created_at"]) for item in listed)
    assert table(as_text.stdout) == [
        {
            "ID": item["id"],
            "NAME": item["name"],
            "TIER": item["tier"],
            "CREATED": item["created_at"],
        }
        for item in listed
    ]


async def test_accounts_and_keys(cli: Cli) -> None:
    created = (await cli.run("accounts", "create", "Acme Books", "--tier", "production")).ok()
    account_id = created.last_line
    assert re.fullmatch(r"acct_[A-Za-z0-9]+", account_id)
    [account] = await query(cli.database_url, select(accounts))
    assert (account.id, account.name, account.tier) == (account_id, "Acme Books", "production")

    client, admin, unknown_account, unknown_key = await cli.run_all(
        ("keys", "create", "--account", account_id),
        ("keys", "create", "--admin"),
        ("keys", "create", "--account", "acct_doesnotexist"),
        ("keys", "revoke", "key_doesnotexist"),
    )
    client_secret = client.ok().last_line
    admin_secret = admin.ok().last_line
    assert re.fullmatch(r"sk_sandbox_[A-Za-z0-9]{32}", client_secret)
    assert re.fullmatch(r"sk_sandbox_[A-Za-z0-9]{32}", admin_secret)
    assert client_secret != admin_secret
    assert unknown_account.returncode != 0
    assert "acct_doesnotexist" in unknown_account.stderr
    assert unknown_key.returncode != 0
    assert "key_doesnotexist" in unknown_key.stderr

    as_json, as_text = await cli.run_all(("keys", "list", "--json"), ("keys", "list"))
    listed = json.loads(as_json.ok().stdout)
    assert isinstance(listed, list)
    assert len(listed) == 2
    for item in listed:
        assert set(item) == KEY_FIELDS
        assert item["prefix"] == "sk_sandbox_"
        assert TIMESTAMP.match(item["created_at"])
        assert item["revoked_at"] is None
    by_role = {item["role"]: item for item in listed}
    assert by_role["client"]["account_id"] == account_id
    assert by_role["client"]["last4"] == client_secret[-4:]
    assert by_role["admin"]["account_id"] is None
    assert by_role["admin"]["last4"] == admin_secret[-4:]
    for result in (as_json, as_text.ok()):
        assert client_secret not in result.stdout + result.stderr
        assert admin_secret not in result.stdout + result.stderr
    assert as_text.stdout.splitlines()[0].split() == [
        "ID",
        "ROLE",
        "ACCOUNT",
        "KEY",
        "CREATED",
        "STATE",
    ]
    assert sorted(table(as_text.stdout), key=lambda row: row["ROLE"]) == [
        {
            "ID": by_role[role]["id"],
            "ROLE": role,
            "ACCOUNT": by_role[role]["account_id"] or "-",
            "KEY": f"sk_sandbox_…{by_role[role]['last4']}",
            "CREATED": by_role[role]["created_at"],
            "STATE": "active",
        }
        for role in ("admin", "client")
    ]

    stored = {row.id: row for row in await query(cli.database_url, select(api_keys))}
    assert client_secret not in {str(value) for value in stored[by_role["client"]["id"]]}

    client_key_id = by_role["client"]["id"]
    revoked = (await cli.run("keys", "revoke", client_key_id)).ok()
    assert revoked.last_line == client_key_id
    after = {item["id"]: item for item in await cli.keys()}
    assert TIMESTAMP.match(after[client_key_id]["revoked_at"])
    assert after[by_role["admin"]["id"]]["revoked_at"] is None
    state = {row["ID"]: row["STATE"] for row in table((await cli.run("keys", "list")).ok().stdout)}
    assert state[client_key_id] == f"revoked {after[client_key_id]['revoked_at']}"


async def test_products_import(cli: Cli) -> None:
    bad_json = cli.workdir / "bad.json"
    bad_records = [
        {"name": "Good", "price": 1, "category": "x"},
        {"name": "Bad", "price": 19.999, "category": "x"},
        {"name": "Also good", "price": 2, "category": "x"},
    ]
    bad_json.write_text(
        "[\n" + ",\n".join(json.dumps(record) for record in bad_records) + "\n]\n",
        encoding="utf-8",
    )
    good_json = cli.workdir / "catalogue.json"
    good_json.write_text(
        json.dumps(
            [
                {
                    "name": "Lamp",
                    "description": "Bright",
                    "price": 19.99,
                    "category": "home",
                    "inventory_count": 5,
                },
                {"name": "Pen", "price": 0.07, "category": "office", "inventory_count": 100},
            ]
        ),
        encoding="utf-8",
    )

    failed_json = await cli.run("products", "import", str(bad_json))
    assert failed_json.returncode != 0
    assert "line 3, field price: must have at most two decimal places" in failed_json.stderr
    assert "nothing was imported" in failed_json.stderr
    assert await query(cli.database_url, select(products)) == []

    imported = (await cli.run("products", "import", str(good_json))).ok()
    assert imported.last_line == "created=2 updated=0"
    rows = {row.name: row for row in await query(cli.database_url, select(products))}
    assert rows["Lamp"].price_minor == 1999
    assert rows["Pen"].price_minor == 7
    lamp_id = rows["Lamp"].id

    update_csv = cli.workdir / "update.csv"
    update_csv.write_text(
        "id,name,description,price,category,inventory_count\n"
        f'{lamp_id},Lamp XL,"Brighter, bigger",25.50,home,3\n'
        ",Desk,Oak,120,office,2\n",
        encoding="utf-8",
    )
    updated = (await cli.run("products", "import", str(update_csv))).ok()
    assert updated.last_line == "created=1 updated=1"
    rows = {row.id: row for row in await query(cli.database_url, select(products))}
    assert len(rows) == 3
    lamp = rows[lamp_id]
    assert (lamp.name, lamp.description, lamp.price_minor, lamp.inventory_count) == (
        "Lamp XL",
        "Brighter, bigger",
        2550,
        3,
    )
    assert {row.name for row in rows.values()} == {"Lamp XL", "Pen", "Desk"}


async def test_usage_errors_and_help(sqlite_cli: Cli) -> None:
    commands: list[tuple[str, ...]] = [
        ("--help",),
        ("serve", "--help"),
        ("migrate", "--help"),
        ("accounts", "create", "--help"),
        ("keys", "create", "--help"),
        ("keys", "list", "--help"),
        ("accounts", "list", "--help"),
        ("keys", "revoke", "--help"),
        ("products", "import", "--help"),
    ]
    *helps, no_account = await sqlite_cli.run_all(*commands, ("keys", "create"))
    for result in helps:
        result.ok()
        assert "Usage: commerce-api" in result.stdout, result.args
    top = helps[0].stdout
    for command in ("serve", "migrate", "accounts", "keys", "products"):
        assert command in top
    help_of = {result.args: result.stdout for result in helps}
    assert "--tier" in help_of[("accounts", "create", "--help")]
    assert "--account" in help_of[("keys", "create", "--help")]
    assert "--admin" in help_of[("keys", "create", "--help")]
    assert "--json" in help_of[("keys", "list", "--help")]
    assert "--json" in help_of[("accounts", "list", "--help")]
    assert "KEY_ID" in help_of[("keys", "revoke", "--help")]
    assert "FILE" in help_of[("products", "import", "--help")]
    assert "--port" in help_of[("serve", "--help")]

    assert no_account.returncode != 0
    assert "--account" in no_account.stderr
    assert no_account.stdout == ""
    # None of these needed (or created) the database.
    assert not (sqlite_cli.workdir / "cli.db").exists()


@pytest.mark.parametrize(
    ("settings", "args", "says"),
    [
        ({"COMMERCE_CURRENCY": "usd"}, (), "invalid settings: COMMERCE_CURRENCY: "),
        ({"COMMERCE_RATE_LIMIT_PRODUCTION": "many"}, (), "COMMERCE_RATE_LIMIT_PRODUCTION: "),
        (
            {"COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT": "0"},
            (),
            "COMMERCE_WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: Input should be greater than or equal"
            " to 1",
        ),
        ({"COMMERCE_ENVIRONMENT": "production"}, (), "set COMMERCE_SECRET_KEY"),
        (
            {"COMMERCE_CORS_ORIGINS": "https://*.shop.example"},
            (),
            "COMMERCE_CORS_ORIGINS: Value error, 'https://*.shop.example' has a wildcard",
        ),
        (
            {"COMMERCE_CORS_ORIGINS": "https://shop.example:443"},
            (),
            "'https://shop.example:443' names https's default port",
        ),
        (
            {"COMMERCE_ENVIRONMENT": "production", "COMMERCE_SECRET_KEY": "k" * 40},
            ("--demo",),
            "--demo is for the sandbox",
        ),
    ],
)
async def test_a_configuration_serve_cannot_start_with_is_one_line_and_exit_code_2(
    sqlite_cli: Cli, settings: dict[str, str], args: tuple[str, ...], says: str
) -> None:
    result = await sqlite_cli.run("serve", "--port", "0", *args, settings=settings)
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1, result.stderr
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_metrics_directories_of_dead_serve_processes_are_removed(tmp_path: Path) -> None:
    """A SIGKILLed `serve --workers N` cannot remove its metrics directory; the next start
    removes it (the name carries the process id). A running process's directory stays."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"{METRICS_DIRECTORY_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{METRICS_DIRECTORY_PREFIX}{os.getpid()}-def"
    other = tmp_path / "unrelated-dir"
    for path in (stale, live, other):
        path.mkdir()
        (path / "counter_1.db").write_bytes(b"x")
    assert remove_stale_metrics_directories(str(tmp_path)) == [str(stale)]
    assert not stale.exists()
    assert live.exists()
    assert other.exists()


async def test_publishable_keys(cli: Cli) -> None:
    """``keys create --account … --publishable``: a ``pk_`` key of the account that reads the
    catalogue, listed with its role and revoked like any key."""
    account_id = (await cli.run("accounts", "create", "Storefront")).ok().last_line
    created, with_admin, without_account = await cli.run_all(
        ("keys", "create", "--account", account_id, "--publishable"),
        ("keys", "create", "--admin", "--publishable"),
        ("keys", "create", "--publishable"),
    )
    secret = created.ok().last_line
    assert re.fullmatch(r"pk_sandbox_[A-Za-z0-9]{32}", secret)
    assert "Created publishable key" in created.stderr
    assert with_admin.returncode == 2
    assert "--admin and --publishable exclude each other" in with_admin.stderr
    assert without_account.returncode == 2
    assert "a publishable key needs --account" in without_account.stderr

    as_json, as_text = await cli.run_all(("keys", "list", "--json"), ("keys", "list"))
    (listed,) = json.loads(as_json.ok().stdout)
    assert listed["role"] == "publishable"
    assert listed["prefix"] == "pk_sandbox_"
    assert listed["account_id"] == account_id
    assert listed["last4"] == secret[-4:]
    assert f"{listed['id']}  publishable  {account_id}" in as_text.ok().stdout
    assert secret not in as_json.stdout + as_text.stdout

    assert (await cli.run("keys", "revoke", listed["id"])).ok().last_line == listed["id"]
    (after,) = await cli.keys()
    assert TIMESTAMP.match(after["revoked_at"])


async def test_a_production_database_issues_pk_live_keys(cli: Cli) -> None:
    account_id = (await cli.run("accounts", "create", "Live shop")).ok().last_line
    created = await cli.run(
        "keys",
        "create",
        "--account",
        account_id,
        "--publishable",
        settings={"COMMERCE_ENVIRONMENT": "production", "COMMERCE_SECRET_KEY": "s" * 32},
    )
    assert re.fullmatch(r"pk_live_[A-Za-z0-9]{32}", created.ok().last_line)


async def test_accounts_and_keys_through_pgbouncer(
    pgbouncer_database_url: str, tmp_path: Path, pycache: Path
) -> None:
    """The commands on accounts and keys open PostgreSQL with asyncpg alone
    (``storage.direct``): through PgBouncer in transaction pooling too, one process after
    another on its server connections, with no statement kept between transactions."""
    pooled = Cli(pgbouncer_database_url, tmp_path, pycache)
    account_id = (await pooled.run("accounts", "create", "Pooled Shop")).ok().last_line
    (await pooled.run("keys", "create", "--account", account_id)).ok()
    (await pooled.run("keys", "create", "--admin")).ok()
    keys = await pooled.keys()
    assert sorted(key["role"] for key in keys) == ["admin", "client"]
    client_key = next(key["id"] for key in keys if key["role"] == "client")
    assert (await pooled.run("keys", "revoke", client_key)).ok().last_line == client_key
    listed = (await pooled.run("keys", "list")).ok().stdout
    assert "revoked " in listed
    accounts_listed = json.loads((await pooled.run("accounts", "list", "--json")).ok().stdout)
    assert [account["id"] for account in accounts_listed] == [account_id]
    assert (await pooled.run("migrate")).ok().last_line == "Database is up to date."
