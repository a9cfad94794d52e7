"""Seeded variation of a scenario's caller timing, so one script yields many different calls.

For run ``n``, :func:`vary_scenario` scales every pause inside a caller turn (``pause_scale``), every barge-in delay
(``barge_in_scale``), every reaction delay after the bot or the start (``delay_scale``) and the caller's speaking rate
(``rate_scale``). Run 0 is the scenario as written, so ``--runs 1`` reproduces the bundled expectations. The stream is
seeded by ``(seed, scenario name, run)``: both arms get the identical variant, and any run reproduces on its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pipecat_harness.sim.scenario import CallerTurn, Scenario, SpeechSegment

__all__ = ["TimingVariation", "vary_scenario"]

# Pauses shorter than VAD's stop window are invisible to the pipeline; keep a visible pause visible so a variant never
# silently removes the case under test.
_MIN_VISIBLE_PAUSE = 0.25


@dataclass(frozen=True)
class TimingVariation:
    """Ranges of the multiplicative factors applied to a scenario's caller timing.

    Parameters:
        pause_scale: Factor range for pauses inside a caller turn.
        barge_in_scale: Factor range for barge-in delays after the bot starts speaking.
        delay_scale: Factor range for the caller's reaction delay before a turn.
        rate_scale: Factor range for the caller's speaking rate.
    """

    pause_scale: tuple[float, float] = (0.75, 1.35)
    barge_in_scale: tuple[float, float] = (0.7, 1.3)
    delay_scale: tuple[float, float] = (0.6, 1.4)
    rate_scale: tuple[float, float] = (0.85, 1.15)

    def __post_init__(self) -> None:
        for name in ("pause_scale", "barge_in_scale", "delay_scale", "rate_scale"):
            low, high = getattr(self, name)
            if not 0 < low <= high:
                raise ValueError(f"{name} must be a range 0 < low <= high, got {(low, high)}")


def _scaled(rng: random.Random, span: tuple[float, float]) -> float:
    return rng.uniform(*span)


def _vary_segment(segment: SpeechSegment, rng: random.Random, variation: TimingVariation,
                  rate: float) -> SpeechSegment:
    if segment.pause is not None:
        pause = segment.pause * _scaled(rng, variation.pause_scale)
        if segment.pause >= _MIN_VISIBLE_PAUSE:
            pause = max(pause, _MIN_VISIBLE_PAUSE)
        return segment.model_copy(update={"pause": round(min(pause, 120.0), 3)})
    if segment.say is not None and segment.secs is not None:
        return segment.model_copy(update={"secs": round(min(segment.secs / rate, 120.0), 3)})
    return segment


def _vary_turn(turn: CallerTurn, rng: random.Random, variation: TimingVariation, rate: float) -> CallerTurn:
    span = variation.barge_in_scale if turn.after == "bot_started" else variation.delay_scale
    delay = turn.delay * _scaled(rng, span)
    if turn.after == "bot":
        # A caller always needs a moment after the bot stops; zero would be an artificial race.
        delay = max(delay, 0.3)
    speech = [_vary_segment(s, rng, variation, rate) for s in turn.speech]
    return turn.model_copy(update={"delay": round(min(delay, 600.0), 3), "speech": speech})


def vary_scenario(scenario: Scenario, run: int, *, seed: int = 0,
                  variation: TimingVariation | None = None) -> Scenario:
    """Return the timing variant ``run`` of a scenario (run 0 is the scenario itself).

    Args:
        scenario: The scenario as written.
        run: Index of the run; 0 returns ``scenario`` unchanged.
        seed: Seed of the whole evaluation.
        variation: Factor ranges (the defaults when omitted).

    Returns:
        A validated copy whose caller timing differs, identical for equal ``(seed, name, run)``.
    """
    if run < 0:
        raise ValueError(f"run must be >= 0, got {run}")
    if run == 0:
        return scenario
    variation = variation or TimingVariation()
    rng = random.Random(f"{seed}:{scenario.name}:{run}")
    rate = _scaled(rng, variation.rate_scale)
    voice = scenario.caller_voice.model_copy(
        update={"words_per_minute": round(min(max(scenario.caller_voice.words_per_minute * rate, 31.0), 400.0), 2)}
    )
    turns = [_vary_turn(t, rng, variation, rate) for t in scenario.caller]
    varied = scenario.model_copy(update={"caller": turns, "caller_voice": voice})
    # model_copy skips validation; re-validate so a variant can never be an invalid call.
    return Scenario.model_validate(varied.model_dump()).model_copy(update={"source": scenario.source})
