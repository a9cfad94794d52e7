"""Seeded variation of a scenario's caller timing, so one script yields many different calls.

Run 0 is the scenario as written, so ``--runs 1`` reproduces the bundled expectations. A variant is seeded by
``(seed, scenario name, run)``: both arms get the identical variant, and any run reproduces on its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields

from pipecat_harness.sim.scenario import CallerTurn, Scenario, SpeechSegment

__all__ = ["TimingVariation", "vary_scenario"]

# Pauses shorter than VAD's stop window are invisible to the pipeline; a visible pause stays visible so a variant never
# silently removes the case under test.
_MIN_VISIBLE_PAUSE = 0.25


@dataclass(frozen=True)
class TimingVariation:
    """Ranges of the factors applied to pauses inside a turn, barge-in delays, reaction delays and speaking rate."""

    pause_scale: tuple[float, float] = (0.75, 1.35)
    barge_in_scale: tuple[float, float] = (0.7, 1.3)
    delay_scale: tuple[float, float] = (0.6, 1.4)
    rate_scale: tuple[float, float] = (0.85, 1.15)

    def __post_init__(self) -> None:
        for name in (f.name for f in fields(self)):
            low, high = getattr(self, name)
            if not 0 < low <= high:
                raise ValueError(f"{name} must be a range 0 < low <= high, got {(low, high)}")


def _vary_turn(turn: CallerTurn, rng: random.Random, variation: TimingVariation, rate: float) -> CallerTurn:
    span = variation.barge_in_scale if turn.after == "bot_started" else variation.delay_scale
    delay = turn.delay * rng.uniform(*span)
    if turn.after == "bot":
        delay = max(delay, 0.3)  # a caller always needs a moment after the bot stops; zero would be an artificial race
    speech: list[SpeechSegment] = []
    for segment in turn.speech:
        if segment.pause is not None:
            pause = segment.pause * rng.uniform(*variation.pause_scale)
            if segment.pause >= _MIN_VISIBLE_PAUSE:
                pause = max(pause, _MIN_VISIBLE_PAUSE)
            segment = segment.model_copy(update={"pause": round(min(pause, 120.0), 3)})
        elif segment.say is not None and segment.secs is not None:
            segment = segment.model_copy(update={"secs": round(min(segment.secs / rate, 120.0), 3)})
        speech.append(segment)
    return turn.model_copy(update={"delay": round(min(delay, 600.0), 3), "speech": speech})


def vary_scenario(scenario: Scenario, run: int, *, seed: int = 0, variation: TimingVariation | None = None) -> Scenario:
    """The validated timing variant ``run`` of a scenario, equal for equal ``(seed, name, run)``; run 0: itself."""
    if run < 0:
        raise ValueError(f"run must be >= 0, got {run}")
    if run == 0:
        return scenario
    variation = variation or TimingVariation()
    rng = random.Random(f"{seed}:{scenario.name}:{run}")
    rate = rng.uniform(*variation.rate_scale)
    wpm = round(min(max(scenario.caller_voice.words_per_minute * rate, 31.0), 400.0), 2)
    turns = [_vary_turn(t, rng, variation, rate) for t in scenario.caller]
    voice = scenario.caller_voice.model_copy(update={"words_per_minute": wpm})
    varied = scenario.model_copy(update={"caller": turns, "caller_voice": voice})
    # model_copy skips validation; re-validate so a variant can never be an invalid call.
    return Scenario.model_validate(varied.model_dump()).model_copy(update={"source": scenario.source})
