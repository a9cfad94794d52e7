from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pipecat_harness.eval.rules import load_rules
from pipecat_harness.eval.runner import EvalRun, run_evaluation
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenarios
from tests.services import chromium_path
from tests.services import dump_dom as render_dom


def bundled(*names: str) -> list[Path]:
    return [BUNDLED_DIR / f"{name}.yaml" for name in names]


@pytest.fixture(scope="session")
def tool_gate_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalRun, Path]:
    """One real evaluation: a duplicate write and a stay-out-of-the-way call, tool gate on and off."""
    out = tmp_path_factory.mktemp("eval-run")
    scenarios = load_scenarios(bundled("duplicate_refund", "tools_different_args_pass"))
    return run_evaluation(scenarios, ["tool_gate"], load_rules(), runs=1, seed=0, out_dir=out, workers=2), out


@pytest.fixture
def dump_dom(tmp_path: Path) -> Callable[[Path], str]:
    """Render a local HTML file in headless Chromium and return the DOM it built."""
    chromium_path()
    return lambda page: render_dom(page, tmp_path / "chromium-profile")
