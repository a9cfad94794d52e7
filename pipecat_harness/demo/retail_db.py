"""The retail demo's business database: customers, orders, items, returns, refunds."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

__all__ = ["CALLBACK_TABLE_SQL", "DEFAULT_SEED", "RETAIL_SCHEMA", "Apply", "RetailDatabase"]

Apply = Callable[[aiosqlite.Connection], Awaitable[Any]]
"""A business write run inside :meth:`RetailDatabase.apply_once`'s transaction; returns its result."""
_Seed = Mapping[str, Sequence[Mapping[str, Any]]]

#: The callbacks table every callback tool writes (``book_callback`` fills only the day).
CALLBACK_TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS callbacks (callback_id INTEGER PRIMARY KEY AUTOINCREMENT, day TEXT NOT NULL,"
    " time TEXT, timezone TEXT, status TEXT NOT NULL DEFAULT 'booked')"
)

RETAIL_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS customers (
    user_id TEXT PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
    email TEXT UNIQUE NOT NULL, phone TEXT, zip TEXT
);
CREATE TABLE IF NOT EXISTS addresses (
    address_id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL REFERENCES customers(user_id),
    address1 TEXT NOT NULL, address2 TEXT DEFAULT '', city TEXT NOT NULL, state TEXT NOT NULL,
    zip TEXT NOT NULL, country TEXT DEFAULT 'USA'
);
CREATE TABLE IF NOT EXISTS orders (
    order_id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES customers(user_id),
    status TEXT NOT NULL, address_id INTEGER REFERENCES addresses(address_id),
    payment_method TEXT NOT NULL DEFAULT 'credit_card_1'
);
CREATE TABLE IF NOT EXISTS items (
    item_id TEXT PRIMARY KEY, order_id TEXT NOT NULL REFERENCES orders(order_id),
    name TEXT NOT NULL, price_usd REAL NOT NULL, status TEXT NOT NULL DEFAULT 'delivered'
);
CREATE TABLE IF NOT EXISTS returns (
    return_id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL REFERENCES orders(order_id),
    item_ids TEXT NOT NULL, payment_method TEXT NOT NULL, created_at TEXT DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE IF NOT EXISTS refunds (
    refund_id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL REFERENCES orders(order_id),
    amount_usd REAL NOT NULL, reason TEXT NOT NULL, created_at TEXT DEFAULT CURRENT_TIMESTAMP
);
{CALLBACK_TABLE_SQL};
CREATE TABLE IF NOT EXISTS applied_operations (
    idempotency_key TEXT PRIMARY KEY, op_type TEXT NOT NULL, request_hash TEXT NOT NULL,
    result TEXT NOT NULL, applied_at TEXT DEFAULT CURRENT_TIMESTAMP
);
"""

#: The default seed: three customers with delivered, pending and processed orders.
DEFAULT_SEED: dict[str, list[dict[str, Any]]] = {
    "customers": [
        {"user_id": "yusuf_rossi_9620", "first_name": "Yusuf", "last_name": "Rossi",
         "email": "yusuf.rossi7301@example.com", "phone": "4155550134", "zip": "19122"},
        {"user_id": "mei_kovacs_8020", "first_name": "Mei", "last_name": "Kovacs",
         "email": "mei.kovacs@example.com", "phone": "2125550199", "zip": "28236"},
        {"user_id": "ava_nguyen_2175", "first_name": "Ava", "last_name": "Nguyen",
         "email": "ava.nguyen@example.com", "phone": "3125550178", "zip": "60601"},
    ],
    "addresses": [
        {"address_id": 1, "user_id": "yusuf_rossi_9620", "address1": "763 Broadway",
         "city": "Philadelphia", "state": "PA", "zip": "19122"},
        {"address_id": 2, "user_id": "mei_kovacs_8020", "address1": "317 Elm Street",
         "city": "Charlotte", "state": "NC", "zip": "28236"},
        {"address_id": 3, "user_id": "ava_nguyen_2175", "address1": "12 Lake Shore Drive",
         "city": "Chicago", "state": "IL", "zip": "60601"},
    ],
    "orders": [
        {"order_id": "#W2378156", "user_id": "yusuf_rossi_9620", "status": "delivered", "address_id": 1},
        {"order_id": "#W4817420", "user_id": "yusuf_rossi_9620", "status": "pending", "address_id": 1},
        {"order_id": "#W7209932", "user_id": "mei_kovacs_8020", "status": "delivered", "address_id": 2},
        {"order_id": "#W5061109", "user_id": "ava_nguyen_2175", "status": "processed", "address_id": 3},
    ],
    "items": [
        {"item_id": "1151293680", "order_id": "#W2378156", "name": "mechanical keyboard", "price_usd": 89.99},
        {"item_id": "4983901480", "order_id": "#W2378156", "name": "smart thermostat", "price_usd": 45.00},
        {"item_id": "6469567736", "order_id": "#W4817420", "name": "water bottle", "price_usd": 19.50,
         "status": "pending"},
        {"item_id": "7624783998", "order_id": "#W7209932", "name": "desk lamp", "price_usd": 34.25},
        {"item_id": "2343503231", "order_id": "#W5061109", "name": "running shoes", "price_usd": 120.00,
         "status": "processed"},
    ],
}


class RetailDatabase:
    """Async access to the retail demo database in the SQLite file ``path`` (``":memory:"`` is not shared)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)

    @classmethod
    async def create(cls, path: str | Path, seed: _Seed | None = None, extra_sql: Iterable[str] = ()) -> RetailDatabase:
        """Create the schema, insert ``seed`` (default: :data:`DEFAULT_SEED`) and run ``extra_sql``."""
        db = cls(path)
        async with aiosqlite.connect(db.path) as conn:
            await conn.executescript(RETAIL_SCHEMA)
            for table, rows in (DEFAULT_SEED if seed is None else seed).items():
                for row in rows:
                    marks = ", ".join("?" for _ in row)
                    await conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({marks})", tuple(row.values()))
            for statement in extra_sql:
                await conn.execute(statement)
            await conn.commit()
        return db

    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run a read query and return rows as dictionaries."""
        async with aiosqlite.connect(self.path) as conn:
            conn.row_factory = aiosqlite.Row
            async with conn.execute(sql, tuple(params)) as cursor:
                return [dict(row) for row in await cursor.fetchall()]

    async def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run a query returning one value (``None`` when there is no row)."""
        rows = await self.query(sql, params)
        return next(iter(rows[0].values())) if rows else None

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one write statement in its own transaction; return the last row id."""
        async with aiosqlite.connect(self.path) as conn:
            cursor = await conn.execute(sql, tuple(params))
            await conn.commit()
            return cursor.lastrowid or 0

    async def apply_once(self, key: str | None, op_type: str, request_hash: str, apply: Apply) -> Any:
        """Apply a write at most once per idempotency key, the way payment APIs do.

        The write and the key's record commit in one transaction. The same key again returns the stored result; with a
        different request it is an error result. An ``{"error": ...}`` result stores nothing, so a later attempt under
        the key may apply. ``key=None`` applies without deduplication.
        """
        async with aiosqlite.connect(self.path) as conn:
            await conn.execute("BEGIN IMMEDIATE")
            if key is not None:
                sql = "SELECT op_type, request_hash, result FROM applied_operations WHERE idempotency_key = ?"
                async with conn.execute(sql, (key,)) as cursor:
                    row = await cursor.fetchone()
                if row is not None:
                    await conn.rollback()
                    if (row[0], row[1]) != (op_type, request_hash):
                        return {"error": f"idempotency key {key!r} was already used for a different request"}
                    return json.loads(row[2])
            result = await apply(conn)
            if isinstance(result, Mapping) and result.get("error"):
                await conn.rollback()
                return result
            if key is not None:
                stored = json.dumps(result, sort_keys=True, default=str)
                await conn.execute("INSERT INTO applied_operations (idempotency_key, op_type, request_hash, result)"
                                   " VALUES (?, ?, ?, ?)", (key, op_type, request_hash, stored))
            await conn.commit()
            return result

    async def applied(self, key: str) -> Any:
        """The stored result of the write applied under ``key``, or ``None`` when none was."""
        text = await self.scalar("SELECT result FROM applied_operations WHERE idempotency_key = ?", (key,))
        return None if text is None else json.loads(text)

    async def order(self, order_id: str) -> dict[str, Any] | None:
        """Return an order with its items and shipping address, or ``None``."""
        rows = await self.query("SELECT * FROM orders WHERE order_id = ?", (order_id,))
        if not rows:
            return None
        order = rows[0]
        order["items"] = await self.query("SELECT item_id, name, price_usd, status FROM items WHERE order_id = ?",
                                          (order_id,))
        address = await self.query("SELECT * FROM addresses WHERE address_id = ?", (order["address_id"],))
        order["address"] = address[0] if address else None
        return order

    async def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Return every table's rows (for traces and debugging)."""
        tables = ("customers", "addresses", "orders", "items", "returns", "refunds", "callbacks", "applied_operations")
        return {table: await self.query(f"SELECT * FROM {table}") for table in tables}

    @staticmethod
    def encode_ids(item_ids: Sequence[str]) -> str:
        """Encode a list of item ids for storage."""
        return json.dumps(sorted(item_ids))
