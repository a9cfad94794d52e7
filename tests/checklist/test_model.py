from pathlib import Path

import pytest

from pipecat_harness.checklist.model import ChecklistError, bundled_checklist, load_checklist


def test_bundled_checklist_loads():
    checklist = bundled_checklist("site_check_in")
    assert [q.id for q in checklist.questions][:2] == ["incidents", "near_misses"]
    assert checklist.question("incidents").pair_with == "near_misses"
    assert [s.id for s in checklist.closing] == ["summary", "feedback", "sign_off"]


def test_unknown_bundled_checklist():
    with pytest.raises(ChecklistError, match="no bundled checklist named 'nope'"):
        bundled_checklist("nope")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- just a list", "must be a mapping"),
        ("name: x\nsections: [", "not valid YAML"),
        ("name: x\nsections: []", "invalid checklist"),
        (
            "name: x\nsections:\n- id: s\n  questions:\n  - {id: a, ask: 'A?'}\n  - {id: a, ask: 'B?'}",
            "duplicate question ids",
        ),
        ("name: x\nsections:\n- id: s\n  questions:\n  - {id: a, ask: 'A?', pair_with: zz}", "pair_with 'zz'"),
        ("name: x\nsections:\n- id: s\n  questions:\n  - {id: a, ask: 'A?', colour: red}", "colour"),
    ],
)
def test_invalid_files_name_the_problem(tmp_path: Path, text: str, message: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ChecklistError, match=message) as info:
        load_checklist(path)
    assert str(path) in str(info.value)


def test_unreadable_file(tmp_path: Path):
    with pytest.raises(ChecklistError, match="cannot read checklist"):
        load_checklist(tmp_path / "missing.yaml")
