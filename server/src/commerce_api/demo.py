"""What ``serve --demo`` sets up: the demo catalogue it loads into an empty database, and the
demo account's client key, kept between starts in a file beside the database.

The key file holds the key itself (the database holds only its hash, as for every key): the
key is printed at every start, so it must be kept somewhere, and a sandbox demo key in an
owner-only file is what a developer's own credentials files are (``~/.pgpass``, the Stripe
CLI's test keys). Revoke the key (``commerce-api keys revoke``) to stop it working: the next
start prints a new one. Deleting the file also gets a new key, and leaves the old one working.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.accounts import repository as accounts_repository
from commerce_api.accounts import service as accounts
from commerce_api.accounts.keys import hash_key, key_environment
from commerce_api.catalog import repository as catalog_repository
from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import utcnow
from commerce_api.settings import Environment

DEMO_ACCOUNT_NAME = "Demo integration"

# (category, [(name, description, price in minor units)]); 6 categories x 10 products.
_CATALOGUE: list[tuple[str, list[tuple[str, str, int]]]] = [
    (
        "books",
        [
            ("The Pragmatic Programmer", "20th anniversary edition, hardcover.", 4299),
            ("Designing Data-Intensive Applications", "Reliable, scalable systems.", 5499),
            ("Clean Architecture", "A craftsman's guide to software structure.", 3499),
            ("Refactoring", "Improving the design of existing code, 2nd edition.", 4799),
            ("Domain-Driven Design", "Tackling complexity in the heart of software.", 5999),
            ("Structure and Interpretation", "Classic text on programs and abstraction.", 3999),
            ("The Phoenix Project", "A novel about IT and DevOps.", 1999),
            ("Site Reliability Engineering", "How Google runs production systems.", 4499),
            ("Fluent Python", "Clear, concise, effective programming.", 5299),
            ("Database Internals", "A deep dive into how databases work.", 4599),
        ],
    ),
    (
        "electronics",
        [
            ("Mechanical Keyboard", "Tenkeyless, hot-swappable switches.", 12900),
            ("USB-C Hub", "7-in-1 with HDMI and 100 W pass-through.", 4999),
            ("Noise-Cancelling Headphones", "Over-ear, 30-hour battery.", 24999),
            ("27-inch Monitor", "4K IPS panel, USB-C input.", 38900),
            ("Wireless Mouse", "Ergonomic, silent clicks.", 2999),
            ("Portable SSD 1 TB", "USB 3.2, 1,050 MB/s.", 10999),
            ("Webcam 1080p", "Auto light correction, privacy shutter.", 5999),
            ("Smart Plug", "Energy monitoring, works offline.", 1499),
            ("E-Reader", "6.8-inch glare-free display.", 13999),
            ("Bluetooth Speaker", "Waterproof, 12-hour battery.", 7999),
        ],
    ),
    (
        "apparel",
        [
            ("Merino T-Shirt", "Lightweight, odour-resistant.", 6500),
            ("Rain Jacket", "Packable, fully taped seams.", 14900),
            ("Running Shoes", "Neutral cushioning, 8 mm drop.", 11999),
            ("Wool Socks (3 pairs)", "Cushioned hiking socks.", 2400),
            ("Denim Jeans", "Straight fit, organic cotton.", 8900),
            ("Hoodie", "Heavyweight fleece, relaxed fit.", 5900),
            ("Baseball Cap", "Adjustable, washed cotton.", 2200),
            ("Down Vest", "700-fill, recycled shell.", 12900),
            ("Linen Shirt", "Breathable, garment-dyed.", 6900),
            ("Leather Belt", "Full-grain, solid brass buckle.", 4500),
        ],
    ),
    (
        "home",
        [
            ("Cast Iron Skillet", "10-inch, pre-seasoned.", 3499),
            ("French Press", "1 litre, stainless steel.", 2999),
            ("Chef's Knife", "8-inch, high-carbon steel.", 8999),
            ("Linen Bedding Set", "Queen, stonewashed.", 18900),
            ("Desk Lamp", "Dimmable LED, adjustable arm.", 4499),
            ("Ceramic Mug Set", "Four 350 ml mugs.", 3200),
            ("Throw Blanket", "Wool blend, 130 x 170 cm.", 7900),
            ("Cutting Board", "End-grain walnut.", 6900),
            ("Glass Storage Jars", "Set of six, airtight lids.", 2799),
            ("Houseplant Pot", "Glazed stoneware with saucer.", 1899),
        ],
    ),
    (
        "toys",
        [
            ("Building Blocks Set", "500 pieces, ages 6+.", 3999),
            ("Wooden Train Set", "Figure-eight track, 40 pieces.", 5499),
            ("Puzzle 1000 Pieces", "Mountain landscape.", 1999),
            ("Plush Bear", "Soft, machine washable.", 1599),
            ("Kite", "Delta kite with 30 m line.", 2499),
            ("Board Game", "Strategy game for 2-4 players.", 4499),
            ("Marble Run", "Modular, 120 pieces.", 3499),
            ("Science Kit", "Twelve chemistry experiments.", 2999),
            ("Remote Control Car", "Rechargeable, 20 km/h.", 4999),
            ("Art Set", "Crayons, pencils and paints in a case.", 2199),
        ],
    ),
    (
        "grocery",
        [
            ("Single-Origin Coffee", "Whole beans, 500 g, Ethiopia.", 1650),
            ("Green Tea", "Loose-leaf sencha, 100 g.", 1200),
            ("Olive Oil", "Extra virgin, 750 ml.", 1495),
            ("Dark Chocolate", "72 % cacao, 100 g.", 450),
            ("Sourdough Flour", "Stone-ground, 2 kg.", 899),
            ("Maple Syrup", "Grade A amber, 250 ml.", 1299),
            ("Sea Salt Flakes", "250 g tub.", 699),
            ("Honey", "Raw wildflower, 500 g.", 1099),
            ("Pasta", "Bronze-cut spaghetti, 1 kg.", 549),
            ("Granola", "Oat and almond, 750 g.", 799),
        ],
    ),
]


def demo_products() -> list[dict[str, Any]]:
    """Rows for the demo catalogue, created a microsecond apart so their order is the listing's."""
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for category, items in _CATALOGUE:
        for name, description, price_minor in items:
            created = now + timedelta(microseconds=len(rows))
            rows.append(
                {
                    "id": new_id("prod"),
                    "name": name,
                    "description": description,
                    "price_minor": price_minor,
                    "category": category,
                    "inventory_count": 25 + (len(rows) * 7) % 100,
                    "created_at": created,
                    "updated_at": created,
                }
            )
    return rows


@dataclass(frozen=True, slots=True)
class DemoSeed:
    loaded: int  # products loaded (0: the catalogue had some already)
    secret: str  # the demo account's client key
    issued: bool  # a new key (False: the kept one, still valid)


async def seed_demo(
    conn: AsyncConnection, environment: Environment, kept_key: str | None
) -> DemoSeed:
    """Load the demo catalogue if the catalogue is empty, and give the demo account's client
    key: ``kept_key`` (the one an earlier start kept) while it is a live key of that account,
    else a new one. Revokes nothing: a key printed before stays valid until revoked."""
    loaded = 0
    if await catalog_repository.count_all(conn) == 0:
        rows = demo_products()
        await catalog_repository.insert_many(conn, rows)
        loaded = len(rows)
    account_id = await accounts_repository.find_account_by_name(conn, DEMO_ACCOUNT_NAME)
    if account_id is None:
        account_id = await accounts.create_account(conn, DEMO_ACCOUNT_NAME, "development")
    if kept_key is not None and key_environment(kept_key) == environment:
        row = await accounts_repository.find_key(conn, hash_key(kept_key))
        if row is not None and row.account_id == account_id and row.revoked_at is None:
            return DemoSeed(loaded, kept_key, issued=False)
    key = await accounts.create_key(conn, environment, account_id=account_id)
    return DemoSeed(loaded, key.secret, issued=True)


# --- where serve --demo keeps its key between starts -------------------------------------------

DEMO_KEY_SUFFIX = ".demo-key"


def demo_key_path(database_url: str, workdir: Path) -> Path | None:
    """Where ``serve --demo`` keeps the demo key of a database: beside a SQLite file
    (``commerce.db`` → ``commerce.db.demo-key``); for PostgreSQL, in the working directory,
    named for the database (its name, and a digest of its host, port and name: never the
    password). None for an in-memory database, which does not outlive the process."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            return None
        path = Path(url.database)
        return path.with_name(path.name + DEMO_KEY_SUFFIX)
    where = f"{url.host or ''}:{url.port or ''}/{url.database or ''}"
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_-]", "_", url.database or "postgres")
    return workdir / f"{name}.{digest}{DEMO_KEY_SUFFIX}"


def read_kept_key(path: Path) -> str | None:
    """The key kept in ``path``, or None when there is none. A file others can read is made
    owner-only again (it holds a working key)."""
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
    return secret or None


def keep_key(path: Path, secret: str) -> None:
    """Write ``secret`` to ``path``, readable and writable by its owner only (0600), replacing
    the file at once: a reader sees the old key or the new one, never half of one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    # Created 0600 (the umask can only narrow it); never readable by others, not even briefly.
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(secret + "\n")
    os.replace(temporary, path)


def key_notes(seeded: DemoSeed, key_file: Path | None, base: str) -> list[str]:
    """What ``serve --demo`` says on stderr before it prints the key (on stdout, alone)."""
    notes = [f"Loaded the demo catalogue: {seeded.loaded} products."] if seeded.loaded else []
    if key_file is None:
        origin = "a new one, not kept for the next starts"
    elif seeded.issued:
        origin = f"a new one, kept in {key_file} (owner-only) for the next starts"
    else:
        origin = f"the one kept in {key_file} by an earlier start"
    return [
        *notes,
        f"The demo account's sandbox client key follows on stdout: {origin}.",
        "Try it with KEY set to it:",
        f'  curl -H "Authorization: Bearer $KEY" {base}/v1/products',
    ]
