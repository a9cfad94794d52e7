from __future__ import annotations

import pytest

from pipecat_harness.eval.variation import TimingVariation, vary_scenario
from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario

SPLIT = load_scenario(BUNDLED_DIR / "split_order_number.yaml")
BARGE = load_scenario(BUNDLED_DIR / "barge_in_after_refund.yaml")


def test_run_zero_is_the_scenario_as_written() -> None:
    assert vary_scenario(SPLIT, 0, seed=5) is SPLIT


def test_same_seed_and_run_give_the_same_variant() -> None:
    assert vary_scenario(SPLIT, 3, seed=7) == vary_scenario(SPLIT, 3, seed=7)


def test_runs_and_seeds_differ() -> None:
    variants = {vary_scenario(SPLIT, run, seed=seed).model_dump_json() for run in (1, 2) for seed in (0, 1)}
    assert len(variants) == 4


def test_pause_rate_and_delay_stay_in_their_ranges() -> None:
    variation = TimingVariation()
    for run in range(1, 30):
        variant = vary_scenario(SPLIT, run, variation=variation)
        pause = variant.caller[0].speech[1].pause
        assert pause is not None
        assert 1.6 * 0.75 - 1e-6 <= pause <= 1.6 * 1.35 + 1e-6
        rate = variant.caller_voice.words_per_minute / SPLIT.caller_voice.words_per_minute
        assert 0.85 - 1e-3 <= rate <= 1.15 + 1e-3
        assert variant.caller[0].delay >= 0.3
        # What is said and the model's script never change, only timing.
        assert [s.say for s in variant.caller[0].speech] == [s.say for s in SPLIT.caller[0].speech]
        assert variant.model == SPLIT.model and variant.expect == SPLIT.expect


def test_barge_in_point_varies_within_its_range() -> None:
    delays = {vary_scenario(BARGE, run).caller[1].delay for run in range(1, 20)}
    assert len(delays) > 10
    assert all(7.0 * 0.7 - 1e-6 <= d <= 7.0 * 1.3 + 1e-6 for d in delays)
    assert all(vary_scenario(BARGE, run).caller[1].after == "bot_started" for run in range(1, 5))


def test_a_visible_pause_never_shrinks_below_the_vad_window() -> None:
    tight = TimingVariation(pause_scale=(0.01, 0.02))
    assert vary_scenario(SPLIT, 1, variation=tight).caller[0].speech[1].pause == 0.25


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="run must be"):
        vary_scenario(SPLIT, -1)
    with pytest.raises(ValueError, match="pause_scale"):
        TimingVariation(pause_scale=(1.2, 0.8))
