"""The input benchmark on audio: the project's corpus voiced by Piper, heard by Silero VAD and Whisper tiny.en.

Every utterance of ``tests/input/data/audio_corpus.jsonl`` (split identifiers of
every format, complete ones, ordinary sentences, three speaking rates) is
synthesised and recognised once through the real front end (cached by
content: ``$PIPECAT_HARNESS_AUDIO_CACHE`` or ``~/.cache/pipecat-harness/audio``),
then replayed into a real ``LLMUserAggregator`` for each stop strategy
(speech timeout 0.6 s, Smart Turn v3) with the identifier hold off and on.
Printed per strategy and arm:

* caught: split identifiers that reached the model in one user message;
* early: split identifiers of which a part reached the model first;
* needless delays: complete utterances whose (last) user turn ended > 300 ms later than with the hold off;
* mean and p90 added wait over complete utterances, against the hold-off arm of the same run;
* release: median time from the end of the continuation's speech to the end of the turn, for caught splits.

Used by ``bench_input.py --audio``; ``--limit N`` runs a slice.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipecat_harness.input import IdentifierHoldConfig

__all__ = ["AUDIO_CORPUS", "AudioArm", "load_audio_corpus", "run_audio_benchmark"]

AUDIO_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "input" / "data" / "audio_corpus.jsonl"
NEEDLESS_DELAY_SECS = 0.3


@dataclass
class AudioArm:
    """Figures of one stop strategy with the hold on or off."""

    turn_stop: str
    hold: bool
    caught: int = 0
    early: int = 0
    splits: int = 0
    needless: int = 0
    complete: int = 0
    added_ms: list[float] = field(default_factory=list)
    release_ms: list[float] = field(default_factory=list)
    watchdog: int = 0
    segmented: int = 0
    misses: list[str] = field(default_factory=list)


def load_audio_corpus(path: Path = AUDIO_CORPUS) -> list[dict[str, Any]]:
    """The corpus rows."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _p90(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _replay_row(row: dict[str, Any]) -> tuple[Any, dict[tuple[str, bool], Any]]:
    """Record (or load) one utterance and replay it in every arm (runs in a worker process)."""
    from loguru import logger

    from pipecat_harness.sim.audio.cache import AudioCache
    from pipecat_harness.sim.audio.recording import record_utterance, utterance_audio
    from pipecat_harness.sim.audio.replay import replay
    from pipecat_harness.sim.audio.voice import PiperCallerVoice

    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    cache = AudioCache()
    utterance = record_utterance(row["parts"], row["pause"], rate=row["rate"], cache=cache)
    pcm, _ = utterance_audio(row["parts"], row["pause"], PiperCallerVoice(cache), rate=row["rate"])
    results = {}
    for turn_stop in ("speech_timeout", "smart_turn"):
        for hold in (False, True):
            config = IdentifierHoldConfig.for_domain(row["domain"]) if hold else None
            results[(turn_stop, hold)] = replay(utterance, pcm, turn_stop=turn_stop, hold_config=config)
    return utterance, results


def run_audio_benchmark(limit: int | None = None, *, show_misses: bool = False, jobs: int = 1,
                        recorded_only: bool = False) -> list[AudioArm]:
    """Record (or load) every utterance, replay it per arm, print the table and return the arms."""
    from concurrent.futures import ProcessPoolExecutor

    from pipecat_harness.sim.audio.cache import AudioCache
    from pipecat_harness.sim.audio.recording import is_recorded

    rows = load_audio_corpus()[:limit] if limit else load_audio_corpus()
    if recorded_only:
        cache = AudioCache()
        total = len(rows)
        rows = [r for r in rows if is_recorded(r["parts"], r["pause"], rate=r["rate"], cache=cache)]
        print(f"--recorded-only: {len(rows)} of {total} utterances have their front end recorded")
    started = time.perf_counter()
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            replayed = list(pool.map(_replay_row, rows))
    else:
        replayed = [_replay_row(row) for row in rows]
    print(f"audio corpus: {len(rows)} utterances ({sum(r['label'] == 'split' for r in rows)} split, "
          f"{sum(r['label'] != 'split' for r in rows)} complete or ordinary; speaking rates "
          f"{sorted({r['rate'] for r in rows})})")
    arms: list[AudioArm] = []
    for turn_stop in ("speech_timeout", "smart_turn"):
        off_stops: dict[str, float] = {}
        for hold in (False, True):
            arm = AudioArm(turn_stop, hold)
            for row, (utterance, results) in zip(rows, replayed, strict=True):
                _score(arm, row, utterance, results[(turn_stop, hold)], off_stops)
            arms.append(arm)
    _print(arms, show_misses)
    from bench_input import print_spelling_rewrites

    print_spelling_rewrites([t for utterance, _ in replayed for t in utterance.transcripts if t.strip()],
                            "the recogniser's transcripts")
    print(f"total {time.perf_counter() - started:.0f} s")
    return arms


def _score(arm: AudioArm, row: dict[str, Any], utterance: Any, result: Any, off_stops: dict[str, float]) -> None:
    arm.watchdog += int(result.watchdog)
    first_stop = result.stops[0] if result.stops else utterance.duration
    # A complete utterance is answered when its last user turn ends (without the hold, Smart Turn may cut
    # "S-A-N-T-O-S. That's it." in two; the reply to the whole comes after the second turn).
    last_stop = result.stops[-1] if result.stops else utterance.duration
    if not arm.hold:
        off_stops[row["id"]] = last_stop
    if row["label"] == "split":
        arm.splits += 1
        if len([t for t in utterance.transcripts if t.strip()]) >= 2:
            arm.segmented += 1  # VAD heard the pause: the recogniser returned the parts separately
        if len(result.messages) == 1:
            arm.caught += 1
            arm.release_ms.append((first_stop - utterance.parts_end[-1]) * 1000)
        else:
            arm.early += 1
            arm.misses.append(f"{row['id']}: {result.messages}")
        return
    arm.complete += 1
    if arm.hold:
        added = last_stop - off_stops.get(row["id"], last_stop)
        arm.added_ms.append(max(0.0, added) * 1000)
        if added > NEEDLESS_DELAY_SECS:
            arm.needless += 1
            arm.misses.append(f"{row['id']} delayed {added:.1f} s: {result.messages}")


def _print(arms: list[AudioArm], show_misses: bool) -> None:
    print(f"{'stop strategy':15} {'hold':5} {'caught':>12} {'early':>12} {'needless delays':>16} "
          f"{'mean added':>11} {'p90 added':>10} {'release median':>15} {'watchdog':>9}")
    for arm in arms:
        mean = statistics.fmean(arm.added_ms) if arm.added_ms else 0.0
        release = statistics.median(arm.release_ms) if arm.release_ms else 0.0
        print(f"{arm.turn_stop:15} {'on' if arm.hold else 'off':5} "
              f"{arm.caught:3}/{arm.splits} {arm.caught / max(1, arm.splits):5.0%} "
              f"{arm.early:3}/{arm.splits} {arm.early / max(1, arm.splits):5.0%} "
              f"{arm.needless:3}/{arm.complete} {arm.needless / max(1, arm.complete):6.1%} "
              f"{mean:8.0f} ms {_p90(arm.added_ms):7.0f} ms {release:12.0f} ms {arm.watchdog:9}")
    on = [a for a in arms if a.hold]
    met = all(a.caught / max(1, a.splits) >= 0.95 and a.needless / max(1, a.complete) <= 0.03
              and (statistics.median(a.release_ms) if a.release_ms else 0.0) <= 800 for a in on)
    print(f"split utterances VAD heard as two or more stretches of speech: {arms[0].segmented}/{arms[0].splits}")
    print(f"targets (caught >= 95%, needless delays <= 3%, release median <= 0.8 s, both strategies): "
          f"{'met' if met else 'NOT met'}")
    if show_misses:
        for arm in on:
            for miss in arm.misses:
                print(f"  [{arm.turn_stop}] {miss}")
