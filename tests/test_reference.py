"""The configuration and scenario references are generated from the models and checked in up to date."""

from pathlib import Path

from pipecat_harness.config import HarnessConfig
from pipecat_harness.reference import config_reference, scenario_reference

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_checked_in_references_are_current() -> None:
    # Regenerate with: python -m pipecat_harness.reference docs
    assert (DOCS / "configuration.md").read_text() == config_reference()
    assert (DOCS / "scenarios.md").read_text() == scenario_reference()


def test_every_config_field_is_documented_with_its_environment_variable() -> None:
    page = config_reference()
    for block, field in HarnessConfig.model_fields.items():
        model = field.annotation
        for name in getattr(model, "model_fields", {}):
            env = f"`PIPECAT_HARNESS_{block.upper()}__{name.upper()}`"
            row = next(line for line in page.splitlines() if env in line)
            assert not row.endswith("|  |"), f"{block}.{name} has no description"


def test_every_scenario_field_has_a_description_and_an_example() -> None:
    rows = [line for line in scenario_reference().splitlines() if line.startswith("| `")]
    assert len(rows) > 60
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
        assert cells[3], f"no example: {row}"
        assert cells[-1], f"no description: {row}"


def test_readme_links_both_references() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    assert "(docs/configuration.md)" in readme and "(docs/scenarios.md)" in readme
