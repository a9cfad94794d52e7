"""Frames per second through simulated calls: harness assembled vs the same pipeline bare.

Both arms run the same bundled scenarios on virtual time, alternating so that
machine noise hits both alike. Printed: frames per wall second per arm and the
ratio (harness / bare); a ratio near 1.0 means the harness adds little work per
frame. Usage: ``python scripts/bench_pipeline.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from loguru import logger
from pipecat.observers.base_observer import BaseObserver, FramePushed

from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import load_scenarios

SCENARIOS = ("duplicate_refund", "split_order_number", "barge_in_after_refund", "silent_confirmation")


class FrameCounter(BaseObserver):
    def __init__(self) -> None:
        super().__init__(observe_every_push=False)
        self.frames = 0

    async def on_push_frame(self, data: FramePushed) -> None:
        self.frames += 1


def measure(use_harness: bool) -> tuple[int, float]:
    frames, wall = 0, 0.0
    for scenario in [s for s in load_scenarios() if s.name in SCENARIOS]:
        counter = FrameCounter()
        result = run_scenario(scenario, use_harness=use_harness, observers=[counter])
        frames += counter.frames
        wall += result.wall_secs
    return frames, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    measure(True)  # warm imports and caches outside the timed rounds
    rates: dict[bool, list[float]] = {True: [], False: []}
    frames: dict[bool, int] = {}
    for _ in range(args.rounds):
        for arm in (False, True):
            count, wall = measure(arm)
            frames[arm] = count
            rates[arm].append(count / wall)
    bare, harnessed = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"scenarios: {', '.join(SCENARIOS)}; rounds: {args.rounds}")
    print(f"bare pipeline:      {bare:10.0f} frames/s  ({frames[False]} frames per round)")
    print(f"harness assembled:  {harnessed:10.0f} frames/s  ({frames[True]} frames per round)")
    print(f"ratio harness/bare: {harnessed / bare:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
