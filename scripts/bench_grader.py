"""Benchmark the per-turn grader.

0. Accuracy per claim kind (recall, false flags) of the rule grader on every
   shipped labeled set, the claim holdouts included.
1. Rule grader throughput: turns per second over the shipped labeled set,
   against a baseline that only splits and tokenizes the same turns.
2. Added frame latency: a real-time Pipecat pipeline carrying committed
   assistant turns and the frames after them, with the TurnGrader observer off
   and on (grading, SQLite audit writes); per-frame latency ratio on/off.
3. A simulated call (the bundled grader scenario) with the grader off and on:
   wall-clock ratio.

Usage: .venv/bin/python scripts/bench_grader.py [--rounds N] [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loguru import logger
from pipecat.frames.frames import Frame, LLMContextAssistantTurnFrame, LLMContextUserTurnFrame, TextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.filters.identity_filter import IdentityFilter
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.config import HarnessConfig
from pipecat_harness.grader.actions import InMemoryOperations
from pipecat_harness.grader.audit import AuditStore
from pipecat_harness.grader.calibration import LABELED_SET_PATH, LabeledSet, evaluate
from pipecat_harness.grader.constraints import ConstraintList
from pipecat_harness.grader.observer import TurnGrader
from pipecat_harness.grader.rules import RuleGrader
from pipecat_harness.numbers import read_numbers, split_sentences, tokenize

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "pipecat_harness" / "scenarios" / "grader_wrong_price_unexecuted_action.yaml"
RETAIL = ROOT / "pipecat_harness" / "grader" / "data" / "retail.yaml"


def accuracy() -> None:
    for path in sorted(LABELED_SET_PATH.parent.glob("*.yaml")):
        if not (path.name.startswith("labeled_") or path.name.startswith("holdout_")):
            continue
        report = asyncio.run(evaluate(lambda c, ledger: RuleGrader(c, ledger), LabeledSet.load(path)))
        print(f"== {path.name}")
        print(report.table())


def throughput(rounds: int) -> None:
    labeled = LabeledSet.load(LABELED_SET_PATH)
    grader = RuleGrader(labeled.constraints, InMemoryOperations())
    texts = [(item.text, item.caller) for item in labeled.items]

    start = time.perf_counter()
    for _ in range(rounds):
        for text, _caller in texts:
            for sentence in split_sentences(text):
                read_numbers(tokenize(sentence))
    baseline = time.perf_counter() - start

    async def grade_all() -> None:
        for _ in range(rounds):
            for text, caller in texts:
                await grader.grade(text, caller, call_id="bench")

    start = time.perf_counter()
    asyncio.run(grade_all())
    graded = time.perf_counter() - start
    turns = rounds * len(texts)
    print(f"rule grader: {turns / graded:,.0f} turns/s ({turns} turns); "
          f"tokenize-only baseline {turns / baseline:,.0f} turns/s; grading costs {graded / baseline:.1f}x tokenizing")


class _Stamp(FrameProcessor):
    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        frame.metadata["bench_t0"] = time.perf_counter()
        await self.push_frame(frame, direction)


class _Measure(FrameProcessor):
    def __init__(self, sink: list[float]) -> None:
        super().__init__()
        self.sink = sink

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if "bench_t0" in frame.metadata:
            self.sink.append(time.perf_counter() - frame.metadata["bench_t0"])
        await self.push_frame(frame, direction)


async def frame_latency(turns: int, with_grader: bool, directory: Path) -> list[float]:
    latencies: list[float] = []
    frames: list[Frame] = []
    for n in range(turns):
        frames.append(LLMContextUserTurnFrame(text="How much is the thermostat?", timestamp=""))
        price = 45 if n % 2 else 55
        frames.append(LLMContextAssistantTurnFrame(text=f"The smart thermostat is {price} dollars.", timestamp=""))
        frames += [TextFrame(text=f"frame {n}.{k}") for k in range(5)]
        frames.append(SleepFrame(sleep=0.005))  # measure each turn's frames, not a backlog of all of them
    observers: list[Any] = []
    store = AuditStore(f"sqlite+aiosqlite:///{directory / f'bench-{with_grader}.db'}")
    if with_grader:
        constraints = ConstraintList.load(RETAIL)
        observers.append(TurnGrader(RuleGrader(constraints), audit=store, tenant="bench", call_id="bench",
                                    constraints_version=constraints.version_id))
    pipeline = Pipeline([_Stamp(), IdentityFilter(), IdentityFilter(), _Measure(latencies)])
    await run_test(pipeline, frames_to_send=frames, observers=observers)
    await store.close()
    return latencies


def simulated_call(with_grader: bool, directory: Path) -> float:
    from pipecat_harness.sim.runner import run_scenario
    from pipecat_harness.sim.scenario import load_scenario

    config = HarnessConfig(
        grader={"enabled": True, "constraints_path": str(RETAIL),
                "audit_url": f"sqlite+aiosqlite:///{directory / 'sim.db'}"},
        trace={"enabled": False},
    )
    start = time.perf_counter()
    run_scenario(load_scenario(SCENARIO), config, controls=["grader"] if with_grader else [])
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="passes over the labeled set")
    parser.add_argument("--turns", type=int, default=100, help="assistant turns in the latency pipeline")
    parser.add_argument("--repeats", type=int, default=3, help="off/on runs of each latency measurement")
    args = parser.parse_args()
    logger.remove()
    logger.add(sys.stderr, level="ERROR")

    accuracy()
    throughput(args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        # Off and on alternate, and each figure is the median over the repeats: the machine is shared.
        medians: dict[bool, list[float]] = {False: [], True: []}
        p95s: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for with_grader in (False, True):
                latencies = sorted(asyncio.run(frame_latency(args.turns, with_grader, directory)))
                medians[with_grader].append(statistics.median(latencies))
                p95s[with_grader].append(latencies[int(len(latencies) * 0.95)])
        for name, figures in (("median", medians), ("p95", p95s)):
            off, on = statistics.median(figures[False]) * 1e3, statistics.median(figures[True]) * 1e3
            print(f"frame latency {name}: grader off {off:.3f} ms, on {on:.3f} ms, ratio on/off {on / off:.2f}")
        walls: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for with_grader in (False, True):
                walls[with_grader].append(simulated_call(with_grader, directory))
        off_wall, on_wall = statistics.median(walls[False]), statistics.median(walls[True])
        print(f"simulated call wall time: grader off {off_wall:.2f} s, on {on_wall:.2f} s, "
              f"ratio on/off {on_wall / off_wall:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
