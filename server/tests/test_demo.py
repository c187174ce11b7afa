"""``serve --demo``'s key (demo.py): kept beside the database, owner-only; reused while it is a
live key of the demo account (on both backends), else a new one, and never a revocation."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from commerce_api.accounts import service as accounts
from commerce_api.demo import DemoSeed, demo_key_path, keep_key, read_kept_key, seed_demo
from commerce_api.storage.db import Database
from tests import factories


def test_the_key_file_is_beside_a_sqlite_database(tmp_path: Path) -> None:
    assert demo_key_path(f"sqlite:///{tmp_path}/shop.db", Path("/elsewhere")) == (
        tmp_path / "shop.db.demo-key"
    )
    assert demo_key_path("sqlite:///./commerce.db", tmp_path) == Path("commerce.db.demo-key")
    assert demo_key_path("sqlite:///:memory:", tmp_path) is None


def test_a_postgresql_databases_key_file_is_named_for_it_without_its_password(
    tmp_path: Path,
) -> None:
    plain = demo_key_path("postgresql://shop@db.internal:5432/shop", tmp_path)
    assert plain is not None
    assert plain.parent == tmp_path
    assert plain.name.startswith("shop.")
    assert plain.name.endswith(".demo-key")
    with_password = demo_key_path("postgresql://shop:s3cret@db.internal:5432/shop", tmp_path)
    assert with_password == plain
    assert "s3cret" not in str(with_password)
    assert demo_key_path("postgresql://shop@db.internal:5432/other", tmp_path) != plain
    assert demo_key_path("postgresql://shop@db2.internal:5432/shop", tmp_path) != plain


def test_the_key_is_kept_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "commerce.db.demo-key"
    previous = os.umask(0)
    try:
        keep_key(path, "sk_sandbox_first")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        keep_key(path, "sk_sandbox_second")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_kept_key(path) == "sk_sandbox_second"
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "no temporary file is left"


def test_a_kept_key_others_can_read_is_made_owner_only_again(tmp_path: Path) -> None:
    path = tmp_path / "commerce.db.demo-key"
    assert read_kept_key(path) is None
    path.write_text("sk_sandbox_kept\n", encoding="utf-8")
    path.chmod(0o644)
    assert read_kept_key(path) == "sk_sandbox_kept"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def _seed(db: Database, kept: str | None) -> DemoSeed:
    async with db.write() as conn:
        return await seed_demo(conn, "sandbox", kept)


async def test_seed_demo_reuses_a_live_key_of_the_demo_account_only_and_revokes_nothing(
    db: Database,
) -> None:
    first = await _seed(db, None)
    assert (first.issued, first.loaded) == (True, 60)
    again = await _seed(db, first.secret)
    assert (again.issued, again.secret, again.loaded) == (False, first.secret, 0)

    another_account = await factories.new_key(db, await factories.new_account(db))
    unknown = "sk_sandbox_" + "x" * 32
    for kept in (another_account.secret, unknown, "not a key"):
        fresh = await _seed(db, kept)
        assert fresh.issued
        assert fresh.secret not in (kept, first.secret)
    async with db.read() as conn:
        keys = await accounts.list_keys(conn)
    assert len(keys) == 5
    assert all(key.revoked_at is None for key in keys), "issuing a demo key revokes nothing"

    async with db.write() as conn:
        demo_keys = [key for key in keys if key.last4 == first.secret[-4:]]
        assert await accounts.revoke_key(conn, demo_keys[0].id)
    assert (await _seed(db, first.secret)).issued, "a revoked key is replaced"
