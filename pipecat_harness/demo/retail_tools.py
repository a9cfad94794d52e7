"""Retail demo tools over :class:`RetailDatabase`, registered through Pipecat function calling.

Each tool is an async function of an arguments mapping returning a JSON-serialisable result (a business error is an
``{"error": ...}`` result; an exception means the write may or may not have happened). A write refuses an order the
trusted ``customer_id`` does not own, and carries the gate's idempotency key to the database, which applies it once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aiosqlite
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema

from pipecat_harness.control import ToolHandler, pipecat_function
from pipecat_harness.demo.retail_db import Apply, RetailDatabase
from pipecat_harness.tools.execution import current_operation
from pipecat_harness.tools.operation_state import OperationRecord, OperationStatus, Reconciliation

__all__ = ["RETAIL_WRITE_TOOLS", "RetailTools", "ToolHandler", "pipecat_function"]

#: Tools that change business state.
RETAIL_WRITE_TOOLS = frozenset({"return_items", "modify_order_address", "issue_refund", "cancel_pending_order",
                                "book_callback", "reschedule_callback"})

_STR = {"type": "string"}

_SCHEMAS = [
    FunctionSchema("find_user_id_by_email", "Find a customer's user id from their email address.",
                   {"email": _STR}, ["email"]),
    FunctionSchema("find_user_id_by_name_zip", "Find a customer's user id from their name and zip code.",
                   {"first_name": _STR, "last_name": _STR, "zip": _STR}, ["first_name", "last_name", "zip"]),
    FunctionSchema("get_user_details", "Get a customer's profile and order ids.", {"user_id": _STR}, ["user_id"]),
    FunctionSchema("get_order_details", "Get an order's status, items and shipping address.",
                   {"order_id": {"type": "string", "description": "Order id such as '#W1234567'."}}, ["order_id"]),
    FunctionSchema("return_items", "Return delivered items of an order to the original payment method.",
                   {"order_id": _STR, "item_ids": {"type": "array", "items": _STR}}, ["order_id", "item_ids"]),
    FunctionSchema("modify_order_address", "Change the shipping address of a pending order.",
                   {"order_id": _STR, "address1": _STR, "address2": _STR, "city": _STR, "state": _STR, "zip": _STR},
                   ["order_id", "address1", "city", "state", "zip"]),
    FunctionSchema("issue_refund", "Refund an amount on an order.",
                   {"order_id": _STR, "amount_usd": {"type": "number"}, "reason": _STR},
                   ["order_id", "amount_usd", "reason"]),
    FunctionSchema("cancel_pending_order", "Cancel a pending order.",
                   {"order_id": _STR, "reason": _STR}, ["order_id", "reason"]),
    FunctionSchema("book_callback", "Book a callback from a specialist on a day.", {"day": _STR}, ["day"]),
    FunctionSchema("reschedule_callback", "Move the latest booked callback to another day.", {"day": _STR}, ["day"])]


def _canonical_order_id(arguments: dict[str, Any]) -> dict[str, Any]:
    if "order_id" in arguments:
        arguments["order_id"] = normalize_order_id(arguments["order_id"])
    return arguments


def normalize_order_id(value: Any) -> str:
    """Return an order id in canonical ``#W1234567`` form (callers often drop the ``#``)."""
    text = str(value).strip().upper().replace(" ", "")
    return "#" + text if text and not text.startswith("#") else text


def _day(arguments: Mapping[str, Any]) -> str:
    return str(arguments.get("day", "")).strip().capitalize()


class RetailTools:
    """The retail demo's business tools over the database ``db``."""

    write_tools = RETAIL_WRITE_TOOLS

    def __init__(self, db: RetailDatabase) -> None:
        self.db = db

    @staticmethod
    def schemas() -> ToolsSchema:
        """Return the tool schemas to put in the ``LLMContext``."""
        return ToolsSchema(standard_tools=list(_SCHEMAS))

    def handlers(self) -> dict[str, ToolHandler]:
        """Return the framework-free handlers by tool name."""
        return {schema.name: getattr(self, schema.name) for schema in _SCHEMAS}

    @staticmethod
    def argument_normalizers() -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """Per tool, the canonical form of its arguments: order ids as ``#W1234567``."""
        return {schema.name: _canonical_order_id for schema in _SCHEMAS if "order_id" in schema.properties}

    @staticmethod
    def resources() -> dict[str, Callable[[Mapping[str, Any]], str | None]]:
        """Per write tool, what it changes: the order, or the caller's callback (one per call)."""
        orders = dict.fromkeys(("return_items", "modify_order_address", "cancel_pending_order"),
                               lambda args: f"order {normalize_order_id(args.get('order_id', ''))}")
        return orders | dict.fromkeys(("book_callback", "reschedule_callback"), lambda args: "the callback booking")

    def register(self, llm: Any, *, wrap: Callable[[str, ToolHandler], ToolHandler] | None = None) -> None:
        """Register every tool on the Pipecat LLM service ``llm``, each handler through ``wrap`` when given."""
        for name, handler in self.handlers().items():
            function = pipecat_function(wrap(name, handler) if wrap else handler)
            llm.register_function(name, function, cancel_on_interruption=name not in self.write_tools)

    async def find_user_id_by_email(self, args: Mapping[str, Any]) -> Any:
        """Find a user id by email."""
        email = str(args.get("email", "")).strip()
        rows = await self.db.query("SELECT user_id, email FROM customers WHERE lower(email) = lower(?)", (email,))
        return dict(rows[0]) if rows else {"error": "no customer with that email"}

    async def find_user_id_by_name_zip(self, args: Mapping[str, Any]) -> Any:
        """Find a user id by first name, last name and zip code."""
        name_zip = (str(args.get("first_name", "")), str(args.get("last_name", "")), str(args.get("zip", "")))
        rows = await self.db.query("SELECT user_id, first_name, last_name, zip FROM customers WHERE lower(first_name) ="
                                   " lower(?) AND lower(last_name) = lower(?) AND zip = ?", name_zip)
        return dict(rows[0]) if rows else {"error": "no customer with that name and zip"}

    async def get_user_details(self, args: Mapping[str, Any]) -> Any:
        """Return a customer's profile and order ids."""
        rows = await self.db.query("SELECT * FROM customers WHERE user_id = ?", (str(args.get("user_id", "")),))
        if not rows:
            return {"error": "user not found"}
        orders = await self.db.query("SELECT order_id FROM orders WHERE user_id = ?", (rows[0]["user_id"],))
        return {**rows[0], "orders": [o["order_id"] for o in orders]}

    async def get_order_details(self, args: Mapping[str, Any]) -> Any:
        """Return an order with its items and address."""
        order = await self.db.order(normalize_order_id(args.get("order_id", "")))
        return order if order is not None else {"error": "order not found"}

    @staticmethod
    def not_owned(order: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, str] | None:
        """The refusal for a write on an order the trusted ``customer_id`` does not own (``None``: allowed)."""
        customer = args.get("customer_id")
        if customer and str(order.get("user_id")) != str(customer):
            return {"error": f"order {order.get('order_id')} does not belong to this customer"}
        return None

    async def _writable_order(self, args: Mapping[str, Any], status: str | None = None,
                              verb: str = "") -> dict[str, Any]:
        """The order a write names, or the write's refusal (``{"error"}``): unknown, not owned, or not in ``status``."""
        order = await self.db.order(normalize_order_id(args.get("order_id", "")))
        if order is None:
            return {"error": "order not found"}
        refused = self.not_owned(order, args)
        if refused is None and status is not None and order["status"] != status:
            refused = {"error": f"order is {order['status']}; only {status} orders can be {verb}"}
        return order if refused is None else refused

    async def _apply(self, op_type: str, args: Mapping[str, Any], apply: Apply) -> Any:
        # The gate's key for this logical operation, when a gate runs the write; the backend applies each key once.
        operation = current_operation()
        key, request_hash = (operation.idempotency_key, operation.request_hash) if operation else (None, "")
        return await self.db.apply_once(key, op_type, request_hash, apply)

    async def reconcile(self, record: OperationRecord) -> Reconciliation:
        """Say what became of an operation of unknown outcome: applied (with its result) or not applied."""
        result = await self.db.applied(record.idempotency_key)
        if result is not None:
            return Reconciliation(OperationStatus.SUCCEEDED, result=result)
        # Applied to nothing, and the gate takes it only once no request of the attempt is under way: the backend
        # applies each key once, so the retry under the same key cannot add a second.
        error = "the retail backend has no record of this operation"
        return Reconciliation(OperationStatus.FAILED, error=error, voided=record.attempt)

    async def return_items(self, args: Mapping[str, Any]) -> Any:
        """Record a return of delivered items."""
        if "error" in (order := await self._writable_order(args, "delivered", "returned")):
            return order
        order_id = order["order_id"]
        wanted = [str(i) for i in args.get("item_ids") or []]
        if not wanted or not set(wanted) <= {item["item_id"] for item in order["items"]}:
            return {"error": "item ids do not belong to this order"}

        async def apply(conn: aiosqlite.Connection) -> Any:
            cursor = await conn.execute("INSERT INTO returns (order_id, item_ids, payment_method) VALUES (?, ?, ?)",
                                        (order_id, RetailDatabase.encode_ids(wanted), order["payment_method"]))
            marks = ",".join("?" for _ in wanted)
            await conn.execute(f"UPDATE items SET status = 'return requested' WHERE item_id IN ({marks})", wanted)
            result = {"return_id": cursor.lastrowid, "order_id": order_id, "item_ids": sorted(wanted)}
            return {**result, "status": "return requested"}

        return await self._apply("return_items", args, apply)

    async def modify_order_address(self, args: Mapping[str, Any]) -> Any:
        """Change the address of a pending order."""
        if "error" in (order := await self._writable_order(args, "pending", "changed")):
            return order
        order_id = order["order_id"]
        street, city, state, zip_code = (str(args.get(name, "")) for name in ("address1", "city", "state", "zip"))
        address = (order["user_id"], street, str(args.get("address2", "") or ""), city, state, zip_code)

        async def apply(conn: aiosqlite.Connection) -> Any:
            cursor = await conn.execute("INSERT INTO addresses (user_id, address1, address2, city, state, zip)"
                                        " VALUES (?, ?, ?, ?, ?, ?)", address)
            await conn.execute("UPDATE orders SET address_id = ? WHERE order_id = ?", (cursor.lastrowid, order_id))
            return {"order_id": order_id, "address_id": cursor.lastrowid, "status": "address updated"}

        return await self._apply("modify_order_address", args, apply)

    async def issue_refund(self, args: Mapping[str, Any]) -> Any:
        """Record a refund on an order."""
        if "error" in (order := await self._writable_order(args)):
            return order
        order_id = order["order_id"]
        try:
            amount = float(args.get("amount_usd", 0))
        except (TypeError, ValueError, OverflowError):
            return {"error": "amount_usd must be a number"}
        if not amount > 0 or amount == float("inf"):
            return {"error": "amount_usd must be positive"}

        async def apply(conn: aiosqlite.Connection) -> Any:
            cursor = await conn.execute("INSERT INTO refunds (order_id, amount_usd, reason) VALUES (?, ?, ?)",
                                        (order_id, amount, str(args.get("reason", ""))))
            return {"refund_id": cursor.lastrowid, "order_id": order_id, "amount_usd": amount, "status": "refunded"}

        return await self._apply("issue_refund", args, apply)

    async def cancel_pending_order(self, args: Mapping[str, Any]) -> Any:
        """Cancel a pending order."""
        if "error" in (order := await self._writable_order(args, "pending", "cancelled")):
            return order
        order_id = order["order_id"]

        async def apply(conn: aiosqlite.Connection) -> Any:
            await conn.execute("UPDATE orders SET status = 'cancelled' WHERE order_id = ?", (order_id,))
            return {"order_id": order_id, "status": "cancelled"}

        return await self._apply("cancel_pending_order", args, apply)

    async def book_callback(self, args: Mapping[str, Any]) -> Any:
        """Book a specialist's callback (the backend accepts several; keeping one is the caller's business)."""
        day = _day(args)
        if not day:
            return {"error": "say which day"}

        async def apply(conn: aiosqlite.Connection) -> Any:
            cursor = await conn.execute("INSERT INTO callbacks (day) VALUES (?)", (day,))
            return {"callback_id": cursor.lastrowid, "day": day, "status": "callback booked"}

        return await self._apply("book_callback", args, apply)

    async def reschedule_callback(self, args: Mapping[str, Any]) -> Any:
        """Move the booked callback to another day."""
        day = _day(args)

        async def apply(conn: aiosqlite.Connection) -> Any:
            latest = "SELECT callback_id FROM callbacks WHERE status = 'booked' ORDER BY callback_id DESC LIMIT 1"
            async with conn.execute(latest) as cursor:
                booked = await cursor.fetchone()
            if booked is None:
                return {"error": "no callback is booked; book one instead"}
            await conn.execute("UPDATE callbacks SET day = ? WHERE callback_id = ?", (day, booked[0]))
            return {"callback_id": booked[0], "day": day, "status": "callback rescheduled"}

        return await self._apply("reschedule_callback", args, apply)
