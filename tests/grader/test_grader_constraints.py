import json
from pathlib import Path

import pytest

from pipecat_harness.grader.constraints import ConstraintError, ConstraintList, ConstraintStore, policy_statement

DESIGN_EXAMPLE = {
    "price_list": [{"id": "px_basic", "service": "basic detail", "price_usd": 149}],
    "hours": {"mon_fri": "08:00-18:00", "sat": "09:00-15:00", "sun": "closed"},
    "policies": {"refund": "no_cash_refunds_store_credit_only", "reschedule": "free_up_to_24h_before"},
    "capabilities": ["book_appointment", "reschedule", "answer_pricing"],
}


def test_the_design_example_loads_from_json(tmp_path: Path) -> None:
    path = tmp_path / "tenant.json"
    path.write_text(json.dumps(DESIGN_EXAMPLE))
    constraints = ConstraintList.load(path)
    assert constraints.price_list[0].amount == 149
    week = constraints.week()
    assert week["sun"].closed and not week["mon"].closed
    assert f"{week['sat'].opens:%H:%M}-{week['sat'].closes:%H:%M}" == "09:00-15:00"
    assert constraints.statements() == {
        "refund": "no cash refunds, store credit only",
        "reschedule": "free up to 24 hours before",
    }
    assert constraints.version_id.startswith("sha-")


def test_policy_identifiers_read_as_statements() -> None:
    assert policy_statement("25_usd_fee_under_24h_notice") == "25 usd fee under 24 hours notice"
    assert policy_statement("returns_within_30d") == "returns within 30 days"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("price_list: [{id: px, service: x}]", "price_list.0: Value error, give exactly one of price_usd or price"),
        ("hours: {mon_fri: '8-late'}", "hours for 'mon_fri' must be 'HH:MM-HH:MM' or 'closed'"),
        ("hours: {funday: closed}", "unknown day 'funday'"),
        ("timezone: Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
        ("prices: []", "prices: Extra inputs are not permitted"),
        ("hours: {sat: '15:00-09:00'}", "close before they open"),
        ("- just a list", "must be a mapping"),
        ("price_list: [{id: a, service: x, price_usd: 1}, {id: a, service: y, price_usd: 2}]", "duplicate price ids"),
    ],
)
def test_malformed_lists_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConstraintError) as info:
        ConstraintList.load(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_unparseable_and_missing_files(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    with pytest.raises(ConstraintError, match="not valid JSON"):
        ConstraintList.load(bad_json)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("a: [unclosed")
    with pytest.raises(ConstraintError, match="not valid YAML"):
        ConstraintList.load(bad_yaml)
    with pytest.raises(ConstraintError, match="cannot read"):
        ConstraintList.load(tmp_path / "missing.yaml")


def test_every_change_is_a_new_version_and_old_ones_stay_readable(tmp_path: Path) -> None:
    store = ConstraintStore(tmp_path)
    first = store.publish(ConstraintList.from_data({**DESIGN_EXAMPLE, "tenant": "acme"}))
    changed = {**DESIGN_EXAMPLE, "tenant": "acme", "price_list": [{"id": "px_basic", "service": "basic detail",
                                                                    "price_usd": 159}]}
    second = store.publish(ConstraintList.from_data(changed))
    assert (first.version, second.version) == ("v1", "v2")
    assert store.versions("acme") == [1, 2]
    assert store.get("acme").price_list[0].amount == 159
    assert store.get("acme", 1).price_list[0].amount == 149
    with pytest.raises(ConstraintError, match="no version 3"):
        store.get("acme", 3)
    with pytest.raises(ConstraintError, match="no constraint lists"):
        store.get("other")
    with pytest.raises(ConstraintError, match="must be letters"):
        store.versions("../etc")
