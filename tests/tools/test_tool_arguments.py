import pytest

from pipecat_harness.tools.arguments import ArgumentAccumulator, ArgumentError, attach_server_context, parse_arguments
from pipecat_harness.tools.canonical import CanonicalizationError, canonical_json, request_hash
from pipecat_harness.tools.schema import schema_of, validate_arguments


def test_canonical_json_normalises_key_order_and_numbers():
    a = canonical_json({"order_id": "#W1", "amount_usd": 45, "meta": {"b": 1.0, "a": [2, 3.50]}})
    b = canonical_json({"meta": {"a": [2.0, 3.5], "b": 1}, "amount_usd": 45.0, "order_id": "#W1"})
    assert a == b == '{"amount_usd":45,"meta":{"a":[2,3.5],"b":1},"order_id":"#W1"}'
    assert request_hash("issue_refund", {"x": 1}) == request_hash("issue_refund", {"x": 1.0})


def test_canonical_json_keeps_meaningful_differences():
    assert canonical_json({"x": True}) != canonical_json({"x": 1})
    assert canonical_json({"x": "45"}) != canonical_json({"x": 45})
    assert request_hash("issue_refund", {"x": 1}) != request_hash("cancel_pending_order", {"x": 1})
    assert canonical_json({"x": "e\u0301"}) == canonical_json({"x": "\u00e9"})  # NFC


@pytest.mark.parametrize("value", [{"x": float("nan")}, {"x": {1, 2}}, {1: "a"}])
def test_canonical_json_rejects_non_json(value):
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


def test_parse_arguments_accepts_mapping_text_bytes_and_empty():
    assert parse_arguments({"a": 1}) == {"a": 1}
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments(b'{"a": 1}') == {"a": 1}
    assert parse_arguments("") == {} and parse_arguments(None) == {}


@pytest.mark.parametrize(
    ("raw", "kind", "words"),
    [
        ('{"a": 1', "malformed_json", "not valid JSON"),
        ("[1, 2]", "not_an_object", "an array"),
        ('"refund"', "not_an_object", "a string"),
        (42, "not_an_object", "a number"),
        (b"\xff\xfe", "malformed_json", "not UTF-8"),
        ('{"a": "' + "x" * 100 + '"}', "too_large", "limit is 64"),
        ({"a": "x" * 100}, "too_large", "limit is 64"),
    ],
)
def test_parse_arguments_rejects_bad_input_with_a_clear_reason(raw, kind, words):
    with pytest.raises(ArgumentError) as info:
        parse_arguments(raw, max_bytes=64)
    assert info.value.kind == kind
    assert words in str(info.value)


def test_server_context_is_attached_and_model_cannot_supply_it():
    assert attach_server_context({"order_id": "#W1"}, {"tenant_id": "t1"}) == {"order_id": "#W1", "tenant_id": "t1"}
    with pytest.raises(ArgumentError) as info:
        attach_server_context({"order_id": "#W1", "tenant_id": "evil"}, {"tenant_id": "t1"})
    assert info.value.kind == "server_context" and "'tenant_id'" in str(info.value)
    with pytest.raises(ArgumentError):
        attach_server_context({"customer_id": "c2"}, {}, reserved=["customer_id"])


def test_accumulator_collects_parallel_calls_by_id():
    acc = ArgumentAccumulator()
    acc.add("call_1", "", name="issue_refund")
    acc.add("call_2", '{"order_id": ', name="get_order_details")
    acc.add("call_1", '{"amount_usd"')
    acc.add("call_2", '"#W2"}')
    acc.add("call_1", ": 45}")
    assert acc.pending == ["call_1", "call_2"] and acc.name("call_1") == "issue_refund"
    assert acc.finish("call_2") == {"order_id": "#W2"}
    assert acc.finish("call_1") == {"amount_usd": 45}
    assert acc.pending == []


def test_accumulator_finalises_once_and_parses_only_on_completion():
    acc = ArgumentAccumulator()
    acc.add("c", '{"a": ')  # incomplete JSON is fine until finish
    acc.add("c", "1}")
    assert acc.finish("c") == {"a": 1}
    with pytest.raises(ArgumentError) as info:
        acc.finish("c")
    assert info.value.kind == "already_finalised"
    with pytest.raises(ArgumentError):
        acc.add("c", "more")


def test_accumulator_is_bounded():
    acc = ArgumentAccumulator(max_bytes=32, max_calls=2)
    for _ in range(100):
        acc.add("big", "x" * 10)
    assert sum(len(p) for p in acc._buffers["big"].parts) == 0  # stopped buffering
    with pytest.raises(ArgumentError) as info:
        acc.finish("big")
    assert info.value.kind == "too_large"
    acc.add("a", "{")
    acc.add("b", "{")
    with pytest.raises(ArgumentError):
        acc.add("c", "{")
    with pytest.raises(ArgumentError) as bad:
        acc.finish("a")
    assert bad.value.kind == "malformed_json"


def test_schema_validation_reports_each_problem():
    schema = {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "pattern": "^#W\\d+$"},
            "amount_usd": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
            "item_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "reason": {"type": "string", "enum": ["damaged item", "wrong item"]},
        },
        "required": ["order_id", "amount_usd"],
        "additionalProperties": False,
    }
    assert validate_arguments({"order_id": "#W1", "amount_usd": 45}, schema) == []
    problems = validate_arguments(
        {"order_id": "W1", "amount_usd": True, "item_ids": [1], "reason": "bored", "note": "x"}, schema
    )
    assert problems == [  # one per problem, with the path of the argument to fix
        "arguments: Additional properties are not allowed ('note' was unexpected)",
        "amount_usd: True is not of type 'number'",
        "item_ids[0]: 1 is not of type 'string'",
        "order_id: 'W1' does not match '^#W\\\\d+$'",
        "reason: 'bored' is not one of ['damaged item', 'wrong item']",
    ]
    assert validate_arguments({}, schema) == [
        "arguments: 'order_id' is a required property", "arguments: 'amount_usd' is a required property"]
    assert validate_arguments({"order_id": "#W1", "amount_usd": 0}, schema) == [
        "amount_usd: 0 is less than or equal to the minimum of 0"]


def test_schema_validation_is_full_json_schema():
    schema = {
        "type": "object",
        "$defs": {"money": {"type": "number", "minimum": 0}},
        "properties": {
            "amount": {"$ref": "#/$defs/money"},
            "when": {"type": "string", "format": "date"},
            "contact": {"oneOf": [{"type": "string", "format": "email"}, {"type": "integer"}]},
            "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        },
    }
    ok = {"amount": 3, "when": "2026-12-02", "contact": "a@example.com", "lines": [{"sku": "x"}]}
    assert validate_arguments(ok, schema) == []
    bad = validate_arguments({"amount": -1, "when": "tomorrow", "contact": "nobody", "lines": [{"sku": 7}]}, schema)
    assert [problem.split(":")[0] for problem in bad] == ["amount", "contact", "lines[0].sku", "when"]
    assert validate_arguments({"a": 1}, {"type": "thing"})[0].startswith(
        "the tool's parameters schema is not valid JSON Schema")


def test_schema_of_reads_pipecat_and_openai_definitions():
    from pipecat_harness.demo.retail_tools import RetailTools

    refund = next(s for s in RetailTools.schemas().standard_tools if s.name == "issue_refund")
    assert schema_of(refund)["required"] == ["order_id", "amount_usd", "reason"]
    openai_tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": ["a"]}}}
    assert schema_of(openai_tool) == {"type": "object", "required": ["a"]}


def _nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


BAD_INPUTS = [
    ('{"a": ' * 492 + "1" + "}" * 492, "too_deep"),
    ({"a": _nested(40)}, "too_deep"),
    ('{"amount_usd": ' + "9" * 5000 + "}", "invalid"),
    ({"amount_usd": 10**5000}, "invalid"),
    ('{"amount_usd": NaN}', "invalid"),
    ('{"amount_usd": Infinity}', "invalid"),
    ({"amount_usd": float("nan")}, "invalid"),
    ({"amount_usd": float("-inf")}, "invalid"),
    ('{"reason": "\\ud800"}', "invalid"),
    ({"reason": "\ud800"}, "invalid"),
    ({"\udfff": 1}, "invalid"),
    ('{"order_id": "#W1", "order_id": "#W2"}', "duplicate_key"),
    ({"when": object()}, "invalid"),
    ({1: "x"}, "invalid"),
]


@pytest.mark.parametrize(("arguments", "kind"), BAD_INPUTS)
async def test_bad_input_is_blocked_with_the_reason_never_raised(arguments, kind):
    from pipecat_harness.tools import ToolGate

    ran = []

    async def handler(args):
        ran.append(args)
        return {"status": "refunded"}

    for tool in ("issue_refund", "get_order_details"):
        gate = ToolGate(write_tools={"issue_refund"}, max_argument_bytes=1_000_000)
        result = await gate.call(tool, arguments, handler)
        assert result.status == "blocked" and result.reason_kind == kind and result.reason
    assert ran == []
