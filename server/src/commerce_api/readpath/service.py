"""The read path's front: authentication with a key cache, product reads, cached pages."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from typing import Any, Protocol

import orjson

from commerce_api.accounts.service import Principal, key_lookup_hash, principal_from_row
from commerce_api.catalog.search_repository import search_words
from commerce_api.catalog.service import list_item, product_detail
from commerce_api.core.ids import looks_like
from commerce_api.core.pagination import page
from commerce_api.readpath.catalog_cache import CatalogCache
from commerce_api.readpath.index_build import Source
from commerce_api.readpath.reader import PostgresReader, Reader, SQLiteReader
from commerce_api.settings import Environment
from commerce_api.storage import freshness
from commerce_api.storage.db import Database
from commerce_api.storage.instance import ensure_value

KEY_CACHE_SIZE = 10_000
PRODUCT_CACHE_SIZE = 10_000


class PerRequest(Protocol):
    """What the read path keeps for one request (``context.RequestContext`` has it): the
    stamps, read at most once per request."""

    versions: freshness.Versions | None
    versions_read: bool


class KeyCache:
    """Principals of recently seen keys, by the key as the caller sent it; dropped whenever any
    key is revoked anywhere (the ``auth`` stamp moves).

    Keyed by the key text rather than its SHA-256: a hit costs a dict lookup instead of a hash
    per request. The key never leaves this process's memory (which reads it on every request
    anyway), and only while its entry lives. A lookup compares the text only after a SipHash
    match under this process's secret hash seed, so its timing tells a caller nothing about any
    cached key; a miss is checked against the stored hash as before (``principal_from_row``).
    """

    def __init__(self) -> None:
        self.version: str | None = None
        self._entries: OrderedDict[str, Principal] = OrderedDict()

    def get(self, token: str, version: str | None) -> Principal | None:
        if version is None or version != self.version:
            return None
        return self._entries.get(token)

    def peek(self, token: str) -> Principal | None:
        """The entry, whatever the current stamp (``get`` with it decides)."""
        return self._entries.get(token)

    def put(self, token: str, principal: Principal, version: str | None) -> None:
        if version is None:
            return
        if version != self.version:
            self._entries.clear()
            self.version = version
        self._entries[token] = principal
        if len(self._entries) > KEY_CACHE_SIZE:
            self._entries.popitem(last=False)


class ReadPath:
    def __init__(
        self,
        db: Database,
        tracker: freshness.ChangeTracker,
        reader: Reader,
        environment: Environment,
        source: Source,
    ) -> None:
        self.db = db
        self.tracker = tracker
        self.reader = reader
        self.environment = environment
        self.keys = KeyCache()
        self.catalog = CatalogCache(reader, tracker, source)
        # Rendered products, valid while the tracker's data_version stays what it was when
        # they were read (SQLite: any commit anywhere; PostgreSQL: any change notified, an
        # order's stock change included, empties it).
        self._products: dict[str, bytes] = {}
        self._products_data_version: int | None = None

    @classmethod
    async def open(cls, db: Database, environment: Environment) -> ReadPath:
        await _ensure_stamps(db)
        tracker: freshness.ChangeTracker
        reader: Reader
        if db.sqlite_path is not None:
            tracker = freshness.SQLiteTracker.open(db.sqlite_path)
            reader = SQLiteReader(db.sqlite_path)
            source = Source(sqlite_path=db.sqlite_path)
        else:
            postgres = await PostgresReader.connect(db.dsn, db)
            tracker = await freshness.PostgresTracker.open(postgres.pool, db.listen_dsn, db)
            reader = postgres
            source = Source(dsn=db.dsn, pooled=db.pooler is not None)
        return cls(db, tracker, reader, environment, source)

    async def close(self) -> None:
        await self.catalog.close()
        await self.tracker.close()
        await self.reader.close()

    async def versions(self, request: PerRequest) -> freshness.Versions | None:
        """The change stamps, read once per request (without ``current``'s coroutine when the
        tracker knows nothing changed)."""
        if not request.versions_read:
            known = self.tracker.known()
            request.versions = known if known is not None else await self.tracker.current()
            request.versions_read = True
        return request.versions

    async def page(
        self,
        request: PerRequest,
        category: str | None,
        limit: int,
        offset: int,
        sort: str = "created_at",
    ) -> bytes | None:
        """A cached product-list page, or None (then read the database)."""
        return await self.catalog.page(await self.versions(request), category, limit, offset, sort)

    async def search(
        self,
        request: PerRequest,
        q: str,
        category: str | None,
        sort: str,
        limit: int,
        offset: int,
    ) -> bytes:
        """A page of the products holding the words of ``q`` (``catalog.service.list_products``
        explains the match), from the in-memory search (``readpath.search_index``); until it
        is built, the ids from the database's full-text index, ordered and paged from the
        in-memory catalogue; until that is built, the page from the database."""
        words = search_words(q)
        if not words:  # nothing to look for: nothing found
            return orjson.dumps(page([], 0, limit, offset))
        versions = await self.versions(request)
        body = await self.catalog.search(versions, words, category, sort, limit, offset)
        if body is not None:
            return body
        if await self.catalog.ready(versions):
            matched = await self.reader.search_ids(words)
            body = await self.catalog.search_page(versions, matched, category, sort, limit, offset)
            if body is not None:
                return body
        total, rows = await self.reader.search(words, category, sort, limit, offset)
        return orjson.dumps(page([list_item(row) for row in rows], total, limit, offset))

    async def categories(self, request: PerRequest) -> bytes | None:
        """The cached category list, or None (then read the database)."""
        return await self.catalog.categories(await self.versions(request))

    async def authenticate(self, token: str, request: PerRequest) -> Principal:
        """The key's principal (401 otherwise), from the cache when it is current."""
        # Not cached: a key that cannot be valid here is refused before any read.
        cached = self.keys.peek(token) is not None
        computed = None if cached else key_lookup_hash(token, self.environment)
        versions = await self.versions(request)
        version = None if versions is None else versions.auth
        principal = self.keys.get(token, version)
        if principal is None:
            if computed is None:
                computed = key_lookup_hash(token, self.environment)
            principal = principal_from_row(await self.reader.key(computed), computed)
            self.keys.put(token, principal, version)
        return principal

    async def product(self, product_id: str) -> dict[str, Any] | None:
        """One active product with its current stock, or None."""
        if not looks_like("prod", product_id):
            return None
        row = await self.reader.product(product_id)
        return None if row is None else product_detail(row)

    async def product_body(self, request: PerRequest, product_id: str) -> bytes | None:
        """The response body for one active product with its current stock, or None.

        On SQLite, from memory when nothing has been committed since it was read: the
        data_version is taken (with the stamps) *before* the row is read, so a commit that
        lands in between makes the entry stale at once, never wrongly fresh.
        """
        versions = await self.versions(request)
        data_version = None if versions is None else versions.data_version
        if data_version is not None and data_version == self._products_data_version:
            cached = self._products.get(product_id)
            if cached is not None:
                return cached
        product = await self.product(product_id)
        if product is None:
            return None
        body = orjson.dumps(product)
        if data_version is not None:
            body = bytes(memoryview(body))  # right-sized copy to keep (see catalog_cache.py)
            if data_version != self._products_data_version or (
                len(self._products) >= PRODUCT_CACHE_SIZE
            ):
                self._products.clear()
                self._products_data_version = data_version
            self._products[product_id] = body
        return body


async def _ensure_stamps(db: Database) -> None:
    """Give each version stamp a first value, so caches can start (never overwrites one)."""
    async with db.write() as conn:
        await ensure_value(conn, freshness.AUTH, secrets.token_hex(8))
        await ensure_value(conn, freshness.CATALOG, "0")  # the count of catalogue changes
