"""``commerce-api accounts …`` and ``commerce-api keys …``: client accounts and API keys."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from commerce_api.cli.common import _note, _reading, _settings, _writing
from commerce_api.cli.tables import echo_listing

if TYPE_CHECKING:
    from commerce_api.accounts import service as accounts
    from commerce_api.storage.executor import Executor


@click.group("accounts")
def accounts_group() -> None:
    """Client accounts."""


@accounts_group.command("create")
@click.argument("name")
@click.option(
    "--tier",
    type=click.Choice(["development", "production"]),
    default="development",
    show_default=True,
)
def accounts_create(name: str, tier: str) -> None:
    """Create an account; prints its id."""
    from commerce_api.audit import keys as audited_keys

    if not name.strip():
        raise click.BadParameter("must not be empty", param_hint="NAME")
    account_id = _writing(
        lambda conn: audited_keys.create_account(
            conn, None, name, "production" if tier == "production" else "development"
        )
    )
    click.echo(account_id)


ACCOUNT_COLUMNS = {
    "ID": lambda account: account["id"],
    "NAME": lambda account: account["name"],
    "TIER": lambda account: account["tier"],
    "CREATED": lambda account: account["created_at"],
}


@accounts_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def accounts_list(as_json: bool) -> None:
    """List accounts, oldest first: a table with a header row, or JSON."""
    from commerce_api.accounts import service as accounts
    from commerce_api.core.timestamps import format_timestamp

    records = [
        {
            "id": account.id,
            "name": account.name,
            "tier": account.tier,
            "created_at": format_timestamp(account.created_at),
        }
        for account in _reading(accounts.list_accounts)
    ]
    echo_listing(records, ACCOUNT_COLUMNS, as_json=as_json)
    if not records and not as_json:
        _note('No accounts yet: commerce-api accounts create "Acme Shop"')


@click.group("keys")
def keys_group() -> None:
    """API keys."""


@keys_group.command("create")
@click.option("--account", "account_id", help="The account the key belongs to.")
@click.option("--admin", is_flag=True, help="An admin (operator) key instead of a client key.")
@click.option(
    "--publishable",
    is_flag=True,
    help="A publishable key (pk_…) of the account: it reads the catalogue and nothing else, "
    "so a storefront's pages may carry it.",
)
def keys_create(account_id: str | None, admin: bool, publishable: bool) -> None:
    """Create a key and print it (it is shown only this once)."""
    from commerce_api.accounts import service as accounts
    from commerce_api.audit import keys as audited_keys

    if admin and publishable:
        raise click.UsageError("--admin and --publishable exclude each other")
    role: accounts.Role = "admin" if admin else "publishable" if publishable else "client"
    if role != "admin" and not account_id:
        raise click.UsageError(f"a {role} key needs --account ACCOUNT_ID (or use --admin)")
    settings = _settings()

    async def create(conn: Executor) -> accounts.CreatedKey:
        return await audited_keys.create_key(
            conn, None, settings.environment, account_id=account_id, role=role
        )

    try:
        key = _writing(create)
    except accounts.AccountNotFound as exc:
        raise click.ClickException(f"no account with id {exc}") from exc
    _note(f"Created {key.role} key {key.id}. Store the secret now; it is not shown again.")
    click.echo(key.secret)


def _key_state(key: dict[str, Any]) -> str:
    return f"revoked {key['revoked_at']}" if key["revoked_at"] else "active"


KEY_COLUMNS = {
    "ID": lambda key: key["id"],
    "ROLE": lambda key: key["role"],
    "ACCOUNT": lambda key: key["account_id"] or "-",
    "KEY": lambda key: f"{key['prefix']}…{key['last4']}",
    "CREATED": lambda key: key["created_at"],
    "STATE": _key_state,
}


@keys_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def keys_list(as_json: bool) -> None:
    """List keys (never their secrets): a table with a header row, or JSON."""
    from commerce_api.accounts import service as accounts
    from commerce_api.core.timestamps import format_optional_timestamp, format_timestamp

    records = [
        {
            "id": key.id,
            "account_id": key.account_id,
            "role": key.role,
            "prefix": key.prefix,
            "last4": key.last4,
            "created_at": format_timestamp(key.created_at),
            "revoked_at": format_optional_timestamp(key.revoked_at),
        }
        for key in _reading(accounts.list_keys)
    ]
    echo_listing(records, KEY_COLUMNS, as_json=as_json)
    if not records and not as_json:
        _note("No keys yet: commerce-api keys create --admin")


@keys_group.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke a key; requests with it are refused from now on."""
    from commerce_api.audit import keys as audited_keys

    if not _writing(lambda conn: audited_keys.revoke_key(conn, None, key_id)):
        raise click.ClickException(f"no key with id {key_id}")
    click.echo(key_id)
