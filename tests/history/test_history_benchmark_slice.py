"""A seeded slice of scripts/bench_history.py: no estimate without timestamps keeps what had not started playing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_history.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_history", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


@pytest.mark.parametrize("seed", [1234, 7])
def test_no_timestamps_rows_keep_no_unstarted_sentence_or_word(seed):
    tallies = _bench().bench_ground_truth(600, seed)
    for key in ("harness_nots", "harness_jitter", "harness_stream"):
        assert tallies[key].unstarted_sentence_kept == 0, key
        assert tallies[key].unstarted_word_kept == 0, key
    within = [e <= 1 for key in ("harness_nots", "harness_jitter") for e in tallies[key].errors]
    assert sum(within) / len(within) >= 0.9
