"""What the harness costs a simulated call: wall time harness / bare, and trace size per call-minute.

Both arms run the same calls on virtual time, interleaved so that machine
noise hits both alike, each from a collected heap: the bare arm is the same
pipeline with no harness (no control built, nothing placed, no trace), the
harness arm the pipeline as ``Harness.place`` assembles it, once without and
once with the trace. Only calls in which the harness changes nothing the
pipeline carries are compared (the same number of distinct frames in both
arms): a call the harness changes, say by blocking a duplicate refund, does
different work, and its time says nothing about overhead.

Printed, medians of ``--rounds`` rounds, with the load average beside each: for the bundled set and for a long
call (``--minutes``), wall seconds per arm and the ratios harness/bare, and
the same for the CPU seconds the process spent (all its threads: the trace
writer's and SQLite's included). On virtual time a call is pure computation,
so on a loaded machine wall time is mostly the share of a core the process
got; CPU time is the steadier measure of the work. Then trace KiB per
call-minute for a 1-minute and a ``--trace-minutes`` call.

    .venv/bin/python scripts/bench_pipeline.py [--rounds 3] [--minutes 10] [--trace-minutes 30]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from loguru import logger
from pipecat.observers.base_observer import BaseObserver, FramePushed

from pipecat_harness.harness import Harness
from pipecat_harness.sim.runner import run_scenario
from pipecat_harness.sim.scenario import Scenario, load_scenarios

ARMS = ("bare", "harness", "harness+trace", "harness-ungrouped")
"""``harness-ungrouped``: the harness with each placement's processors one by one, no ``PlacementGroup``."""


class FrameCounter(BaseObserver):
    """Counts distinct frames (first pushes): the work of a call, however many processors it crosses."""

    def __init__(self) -> None:
        super().__init__(observe_every_push=False)
        self.frames = 0

    async def on_push_frame(self, data: FramePushed) -> None:
        self.frames += 1


def long_call(minutes: float) -> Scenario:
    """A retail call of about ``minutes`` minutes: questions, order lookups (a tool call) and answers, repeated."""
    turns = max(1, round(minutes * 60 / 13.0))  # one exchange takes about 13 s of call time
    cycle = [
        "What are your opening hours on Saturday?",
        "Can you check my order, it's W two three seven eight one five six.",
        "And do you ship to Canada as well?",
    ]
    return Scenario.model_validate({
        "name": f"long_call_{minutes:g}_min",
        "description": "A long ordinary call: questions and order lookups, nothing for a control to correct.",
        "domain": "retail",
        "max_call_secs": 3600,
        "model": {
            "greeting": "Thanks for calling Acme. How can I help you today?",
            "decisions": [
                {"when": {"user": "hours"}, "times": 1000,
                 "say": "On Saturdays we are open from nine in the morning until four in the afternoon."},
                {"when": {"tool": "get_order_details"}, "times": 1000,
                 "say": "Your order has been delivered. It contained a thermostat and a bulb set."},
                {"when": {"user": "order"}, "times": 1000, "say": "Let me look that order up.",
                 "tool_calls": [{"name": "get_order_details", "args": {"order_id": "#W2378156"}}]},
                {"when": {"user": "ship|canada"}, "times": 1000,
                 "say": "Yes, we ship to Canada. Delivery usually takes five to eight business days."},
            ],
        },
        "caller": [{"speech": [{"say": cycle[i % len(cycle)]}]} for i in range(turns)],
    })


def run(scenario: Scenario, arm: str, trace_dir: Path) -> tuple[int, float, float, float]:
    """One call in one arm: distinct frames, wall seconds, CPU seconds and call seconds."""
    counter = FrameCounter()
    Harness.grouped = arm != "harness-ungrouped"
    gc.collect()  # every call starts on a collected heap: no arm pays for the garbage the one before left
    cpu = time.process_time()
    try:
        result = run_scenario(
            scenario, use_harness=arm != "bare", observers=[counter],
            trace_dir=trace_dir if arm == "harness+trace" else None, max_wall_secs=600,
        )
    finally:
        Harness.grouped = True
    if scenario.name.startswith("long_call") and not result.caller_completed:
        raise RuntimeError(f"{scenario.name} ({arm}): the caller did not finish")
    return counter.frames, result.wall_secs, time.process_time() - cpu, result.virtual_secs


Medians = dict[str, dict[str, float]]
"""Per measure (``wall``, ``cpu``), per arm: median seconds."""


def compare(calls: list[Scenario], rounds: int, trace_dir: Path) -> tuple[Medians, list[str]]:
    """Median total wall and CPU seconds per arm over the calls with the same frames in every arm, and the others.

    Arms are interleaved call by call, in alternating order from round to round.
    """
    frames: dict[str, set[int]] = {scenario.name: set() for scenario in calls}
    secs: list[dict[str, dict[str, dict[str, float]]]] = []
    for round_number in range(rounds):
        order = ARMS if round_number % 2 == 0 else tuple(reversed(ARMS))
        secs.append({measure: {arm: {} for arm in ARMS} for measure in ("wall", "cpu")})
        for scenario in calls:
            for arm in order:
                count, wall, cpu, _ = run(scenario, arm, trace_dir)
                frames[scenario.name].add(count)
                secs[-1]["wall"][arm][scenario.name] = wall
                secs[-1]["cpu"][arm][scenario.name] = cpu
    same = [name for name, counts in frames.items() if len(counts) == 1]
    medians = {
        measure: {arm: statistics.median(sum(r[measure][arm][name] for name in same) for r in secs) for arm in ARMS}
        for measure in ("wall", "cpu")
    }
    return medians, [name for name in frames if name not in same]


def print_comparison(label: str, medians: Medians) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for measure in ("wall", "cpu"):
        arms = medians[measure]
        bare = arms["bare"]
        print(f"{label} ({measure}, load {load}): bare {bare:.2f} s, harness {arms['harness']:.2f} s, "
              f"harness+trace {arms['harness+trace']:.2f} s, ungrouped {arms['harness-ungrouped']:.2f} s -> "
              f"harness/bare {arms['harness'] / bare:.3f}, harness+trace/bare {arms['harness+trace'] / bare:.3f}, "
              f"ungrouped/bare {arms['harness-ungrouped'] / bare:.3f}")


def trace_density(minutes: float, trace_dir: Path) -> tuple[float, float]:
    """Trace KiB per call-minute and the call's length in minutes."""
    scenario = long_call(minutes)
    _, _, _, call_secs = run(scenario, "harness+trace", trace_dir)
    size = (trace_dir / f"{scenario.name}.jsonl").stat().st_size
    return size / 1024 / (call_secs / 60), call_secs / 60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the long call compared")
    parser.add_argument("--trace-minutes", type=float, default=30.0, help="length of the long call's trace")
    parser.add_argument("--skip-trace-size", action="store_true")
    args = parser.parse_args()
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        trace_dir = Path(tmp)
        bundled = load_scenarios()
        for arm in ARMS:  # warm imports and caches outside the timed rounds
            run(bundled[0], arm, trace_dir)
        medians, dropped = compare(bundled, args.rounds, trace_dir)
        print(f"bundled set: {len(bundled) - len(dropped)} of {len(bundled)} calls carry the same frames in every "
              f"arm; rounds: {args.rounds}")
        if dropped:
            print(f"  not compared (the harness changes what they carry): {', '.join(dropped)}")
        print_comparison("bundled set", medians)
        medians, dropped = compare([long_call(args.minutes)], args.rounds, trace_dir)
        if dropped:
            raise RuntimeError("the long call carries different frames with the harness")
        print_comparison(f"long call ({args.minutes:g} min)", medians)
        if not args.skip_trace_size:
            short_density, short_minutes = trace_density(1.0, trace_dir)
            long_density, long_minutes = trace_density(args.trace_minutes, trace_dir)
            print(f"trace: {short_density:.1f} KiB per call-minute at {short_minutes:.1f} min, "
                  f"{long_density:.1f} at {long_minutes:.1f} min (ratio {long_density / short_density:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
