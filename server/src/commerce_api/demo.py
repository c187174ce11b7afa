"""The demo catalogue that ``serve --demo`` loads into an empty database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.accounts import repository as accounts_repository
from commerce_api.accounts import service as accounts
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


async def seed_demo(conn: AsyncConnection, environment: Environment) -> tuple[int, str]:
    """Load the demo catalogue if the catalogue is empty; return (products loaded, a new key).

    Every call issues a fresh client key for the demo account (keys are shown only once, so
    this is the only way to print a usable one on each start) and revokes the ones it issued
    before: a restart never leaves an older printed key working.
    """
    loaded = 0
    if await catalog_repository.count_all(conn) == 0:
        rows = demo_products()
        await catalog_repository.insert_many(conn, rows)
        loaded = len(rows)
    account_id = await accounts_repository.find_account_by_name(conn, DEMO_ACCOUNT_NAME)
    if account_id is None:
        account_id = await accounts.create_account(conn, DEMO_ACCOUNT_NAME, "development")
    await accounts_repository.revoke_account_keys(conn, account_id, utcnow())
    key = await accounts.create_key(conn, environment, account_id=account_id)
    return loaded, key.secret
