"""A small seeded slice of scripts/soak_tools.py: faults, restarts, SIGKILL, late landings, outages, frozen owners.

The backend counts every application and does not dedupe; the long run is the script itself.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.services import postgres_url

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak_tools.py"


def _soak_module():
    spec = importlib.util.spec_from_file_location("soak_tools", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("soak_tools", module)  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
async def test_a_seeded_fault_schedule_slice_applies_every_logical_operation_once(database, tmp_path):
    if database == "postgres":
        postgres_url()  # skips visibly when PostgreSQL is unreachable
    soak = _soak_module()
    figures = await soak.soak(database, 5, 3, tmp_path)
    assert figures is not None and figures.schedules == 5
    assert figures.applied_twice == 0
    assert figures.applied_not_succeeded == 0 and figures.succeeded_not_applied == 0
    assert figures.left_executing == 0 and figures.exceptions == []
    assert figures.live_orphans == 0 and figures.reported_not_executed == 0
    assert figures.events > 0 and figures.events_lost == 0 and figures.delivered_twice == 0
