import argparse
from pathlib import Path

import pytest

from pipecat_harness.grader import command
from pipecat_harness.grader.calibration import LABELED_SET_PATH, LabeledSet, evaluate
from pipecat_harness.grader.constraints import ConstraintError
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.grader.verdict import CATEGORIES


def test_shipped_labeled_set_covers_every_category_both_ways() -> None:
    labeled = LabeledSet.load(LABELED_SET_PATH)
    assert len(labeled.items) >= 200
    for category in CATEGORIES:
        labels = {item.grounded for item in labeled.items if item.category == category}
        assert labels == {True, False}, category
    texts = " ".join(item.text for item in labeled.items)
    for sample in ("one forty-nine", "€", "between", "percent"):
        assert sample in texts


async def test_rule_grader_meets_the_target_on_the_shipped_set() -> None:
    report = await evaluate(lambda c, ledger: RuleGrader(c, ledger), LabeledSet.load(LABELED_SET_PATH))
    assert report.total.recall >= 0.90
    assert report.total.false_flag_rate <= 0.05
    assert "precision" in report.table()


async def test_held_out_set_also_meets_the_target() -> None:
    holdout = LabeledSet.load(LABELED_SET_PATH.parent / "holdout_detailing.yaml")
    report = await evaluate(lambda c, ledger: RuleGrader(c, ledger), holdout)
    assert report.total.recall >= 0.90 and report.total.false_flag_rate <= 0.05


@pytest.mark.parametrize("name", ["holdout_claims.yaml", "holdout_claims_2.yaml"])
async def test_claim_holdouts_meet_the_target_on_every_claim_kind(name: str) -> None:
    labeled = LabeledSet.load(LABELED_SET_PATH.parent / name)
    assert set(labeled.tenants) == {"retail", "dental"}
    report = await evaluate(lambda c, ledger: RuleGrader(c, ledger), labeled)
    for kind in ("price", "hours", "policy", "capability"):
        score = report.scores[kind]
        assert score.tp + score.fn >= 20 and score.fp + score.tn >= 34, kind
        assert score.recall >= 0.95 and score.false_flag_rate <= 0.03, (kind, report.table())
    assert report.scores["none"].false_flag_rate <= 0.03


def test_items_name_known_tenants(tmp_path: Path) -> None:
    path = tmp_path / "set.yaml"
    path.write_text(f"constraints: {LABELED_SET_PATH.parent / 'detailing.yaml'}\n"
                    "items: [{text: hi, category: none, grounded: true, tenant: bakery}]\n")
    with pytest.raises(ConstraintError, match="unknown tenant 'bakery'"):
        LabeledSet.load(path)


def test_eval_command_prints_precision_and_recall_per_category(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers())
    args = parser.parse_args(["grader", "eval", str(LABELED_SET_PATH), "--min-recall", "0.9"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for category in CATEGORIES:
        assert category in out
    assert "recall" in out and "false flags" in out


def test_eval_command_rejects_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "set.yaml"
    path.write_text("items: []\n")
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers())
    args = parser.parse_args(["grader", "eval", str(path)])
    assert args.func(args) == 2
    assert "needs 'constraints'" in capsys.readouterr().err
    path.write_text(f"constraints: {LABELED_SET_PATH.parent / 'detailing.yaml'}\nitems: [{{text: hi}}]\n")
    with pytest.raises(ConstraintError, match="item 0"):
        LabeledSet.load(path)
