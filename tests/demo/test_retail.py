import pytest

from pipecat_harness.demo.retail_db import RetailDatabase
from pipecat_harness.demo.retail_tools import RETAIL_WRITE_TOOLS, RetailTools, normalize_order_id


@pytest.fixture
async def tools(tmp_path):
    return RetailTools(await RetailDatabase.create(tmp_path / "retail.db"))


async def test_reads_find_customers_and_orders(tools):
    # A lookup answers with the record's fields it matched, so a verification can be checked against the record.
    assert await tools.find_user_id_by_email({"email": "MEI.KOVACS@example.com"}) == {
        "user_id": "mei_kovacs_8020", "email": "mei.kovacs@example.com"}
    assert await tools.find_user_id_by_name_zip({"first_name": "yusuf", "last_name": "Rossi", "zip": "19122"}) == {
        "user_id": "yusuf_rossi_9620", "first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}
    order = await tools.get_order_details({"order_id": "w2378156"})
    assert order["order_id"] == "#W2378156" and len(order["items"]) == 2
    assert order["address"]["city"] == "Philadelphia"
    assert await tools.get_order_details({"order_id": "#W0000000"}) == {"error": "order not found"}


async def test_writes_are_sql_writes(tools):
    db = tools.db
    refund = await tools.issue_refund({"order_id": "#W2378156", "amount_usd": "45", "reason": "damaged"})
    assert refund["status"] == "refunded"
    assert await db.scalar("SELECT amount_usd FROM refunds WHERE refund_id = ?", (refund["refund_id"],)) == 45.0
    ret = await tools.return_items({"order_id": "#W2378156", "item_ids": ["4983901480"]})
    assert ret["status"] == "return requested"
    assert await db.scalar("SELECT status FROM items WHERE item_id = '4983901480'") == "return requested"
    moved = await tools.modify_order_address({"order_id": "#W4817420", "address1": "88 Pine Street",
                                              "city": "Austin", "state": "TX", "zip": "78701"})
    assert moved["status"] == "address updated"
    assert (await db.order("#W4817420"))["address"]["address1"] == "88 Pine Street"
    assert (await tools.cancel_pending_order({"order_id": "#W4817420", "reason": "x"}))["status"] == "cancelled"


@pytest.mark.parametrize(
    ("tool", "args", "error"),
    [
        ("return_items", {"order_id": "#W4817420", "item_ids": ["6469567736"]}, "only delivered"),
        ("return_items", {"order_id": "#W2378156", "item_ids": ["9999999999"]}, "do not belong"),
        ("modify_order_address", {"order_id": "#W2378156", "address1": "x", "city": "y", "state": "z", "zip": "1"},
         "only pending"),
        ("issue_refund", {"order_id": "#W2378156", "amount_usd": "lots", "reason": "x"}, "must be a number"),
        ("issue_refund", {"order_id": "#W2378156", "amount_usd": -5, "reason": "x"}, "must be positive"),
        ("cancel_pending_order", {"order_id": "#W0000001", "reason": "x"}, "order not found"),
    ],
)
async def test_business_rules_return_errors_and_write_nothing(tools, tool, args, error):
    before = await tools.db.snapshot()
    result = await tools.handlers()[tool](args)
    assert error in result["error"]
    assert await tools.db.snapshot() == before


def test_write_tools_and_schemas_match():
    names = {schema.name for schema in RetailTools.schemas().standard_tools}
    assert RETAIL_WRITE_TOOLS <= names
    assert normalize_order_id(" w 2378156") == "#W2378156"


async def test_a_write_on_an_order_the_trusted_customer_does_not_own_is_refused(tools):
    # customer_id is server context (the gate attaches it; a model cannot supply it).
    other = await tools.issue_refund({"order_id": "#W2378156", "amount_usd": 45, "reason": "damaged",
                                      "customer_id": "mei_kovacs_8020"})
    assert other == {"error": "order #W2378156 does not belong to this customer"}
    cancel = await tools.cancel_pending_order({"order_id": "#W4817420", "reason": "x",
                                                "customer_id": "ava_nguyen_2175"})
    assert "does not belong" in cancel["error"]
    assert await tools.db.query("SELECT * FROM refunds") == []
    own = await tools.issue_refund({"order_id": "#W2378156", "amount_usd": 45, "reason": "damaged",
                                    "customer_id": "yusuf_rossi_9620"})
    assert own["status"] == "refunded"
