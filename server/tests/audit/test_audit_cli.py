"""The command line in the audit trail (a real ``commerce-api`` process, both backends): it
has no key, so its changes are the system's, ``{"type": "system", "id": "cli"}``."""

from __future__ import annotations

from pathlib import Path

from commerce_api.storage.db import Database
from tests import factories
from tests.audit.helpers import by, trail


async def test_keys_made_and_revoked_by_the_cli_are_the_systems(
    database_url: str, db: Database, tmp_path: Path
) -> None:
    env = factories.cli_env(database_url)
    output = factories.run_cli(env, tmp_path, "keys", "create", "--admin")
    listed = factories.run_cli(env, tmp_path, "keys", "list", "--json")
    (row,) = await trail(db, action="key.create")
    assert by(row) == ("system", "cli")
    assert row["changes"] == {"role": [None, "admin"]}
    assert row["target"]["id"] in listed
    assert factories.last_line(output) not in str(row)  # never the secret
    factories.run_cli(env, tmp_path, "keys", "revoke", row["target"]["id"])
    (revoked,) = await trail(db, action="key.revoke")
    assert (by(revoked), revoked["target"]["id"]) == (("system", "cli"), row["target"]["id"])


async def test_an_account_created_by_the_cli_is_the_systems(
    database_url: str, db: Database, tmp_path: Path
) -> None:
    env = factories.cli_env(database_url)
    output = factories.run_cli(env, tmp_path, "accounts", "create", "Acme", "--tier", "production")
    (row,) = await trail(db, action="account.create")
    assert by(row) == ("system", "cli")
    assert row["target"] == {"type": "account", "id": factories.last_line(output)}
    assert row["changes"] == {"name": [None, "Acme"], "tier": [None, "production"]}
