"""Revoke a key when told to, for ``bench/cluster_faults.py``'s fault (e): what ``commerce-api
keys revoke KEY_ID`` does (the audited revocation, which bumps the key stamp every process
listens for), with its imports, its connection and its migration check done beforehand, so
that the revocation itself is one transaction at a known moment.

    COMMERCE_DATABASE_URL=... python bench/cluster_revoke.py KEY_ID

Prints ``ready``; on a line on stdin, revokes, prints ``revoked`` and exits (status 1: no such
key).
"""

from __future__ import annotations

import asyncio
import sys

from commerce_api.audit.keys import revoke_key
from commerce_api.settings import Settings
from commerce_api.storage.db import Database


async def main(key_id: str) -> int:
    db = Database(Settings().database_url)
    try:
        await db.migrate()
        async with db.write() as conn:
            await conn.exec_driver_sql("SELECT 1")
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        async with db.write() as conn:
            done = await revoke_key(conn, None, key_id)
        print("revoked" if done else "no such key", flush=True)
        return 0 if done else 1
    finally:
        await db.dispose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
