"""Benchmark the ending rules on the labeled corpus against the plain length rules.

Prints, for the domain-aware rules and for the length-rules baseline measured
in the same run:

* catch rate: incomplete identifiers held;
* false-hold rate: complete identifiers held, and ordinary speech held;
* mean added wait on complete utterances (complete identifiers and ordinary
  speech), in ms, using each domain's additional wait;
* cost per decision in microseconds, and its ratio to the baseline;
* the cost on one 100 000-character transcript (bounded work).

With the default corpus it also prints the same figures on a smaller holdout
corpus (``tests/input/data/endings_holdout.jsonl``), written apart from the
corpus the rules were developed against.

With ``--matrix`` it runs the hold on the speech matrix (``bench_input_matrix.py``): three voices, two
recognisers and three channels, on a dev split and a test split reported apart.

With ``--audio`` it runs the same controls on real recognition instead (see
``bench_input_audio.py``): Piper -> Silero VAD -> Whisper tiny.en, per stop strategy.

Usage: ``python scripts/bench_input.py [--corpus PATH] [--repeat N] [--show-misses] [--audio [--limit N]]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipecat_harness.input import HoldDecision, IdentifierHoldConfig, hold_decision
from pipecat_harness.input.spelling import normalize_spelling

__all__ = ["CorpusRow", "Scores", "evaluate", "load_corpus", "main"]

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "input" / "data" / "endings.jsonl"
HOLDOUT_CORPUS = DEFAULT_CORPUS.with_name("endings_holdout.jsonl")


@dataclass(frozen=True)
class CorpusRow:
    """One labeled ending."""

    text: str
    label: str
    domain: str
    shape: str


@dataclass
class Scores:
    """Figures of one rule set on the corpus."""

    name: str
    catch_rate: float
    false_hold_complete: float
    false_hold_ordinary: float
    mean_added_wait_ms: float
    us_per_decision: float
    misses: list[CorpusRow]
    false_holds: list[CorpusRow]


def load_corpus(path: Path) -> list[CorpusRow]:
    """Read the JSONL corpus."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            rows.append(CorpusRow(data["text"], data["label"], data["domain"], data["shape"]))
        except (ValueError, KeyError) as exc:
            raise SystemExit(f"{path}:{number}: bad corpus line: {exc}") from exc
    return rows


def evaluate(
    name: str, rows: list[CorpusRow], config_for: Callable[[str], IdentifierHoldConfig], repeat: int
) -> Scores:
    """Score one rule set: decisions, rates, added wait and timing."""
    configs = {row.domain: config_for(row.domain) for row in rows}
    decisions: list[HoldDecision] = [hold_decision(row.text, configs[row.domain]) for row in rows]
    start = time.perf_counter()
    for _ in range(repeat):
        for row in rows:
            hold_decision(row.text, configs[row.domain])
    elapsed = time.perf_counter() - start

    incomplete = [(r, d) for r, d in zip(rows, decisions, strict=True) if r.label == "incomplete"]
    complete = [(r, d) for r, d in zip(rows, decisions, strict=True) if r.label == "complete"]
    ordinary = [(r, d) for r, d in zip(rows, decisions, strict=True) if r.label == "ordinary"]
    finished = complete + ordinary
    wait_ms = [configs[r.domain].extra_wait_secs * 1000 if d.hold else 0.0 for r, d in finished]
    return Scores(
        name=name,
        catch_rate=sum(d.hold for _, d in incomplete) / max(1, len(incomplete)),
        false_hold_complete=sum(d.hold for _, d in complete) / max(1, len(complete)),
        false_hold_ordinary=sum(d.hold for _, d in ordinary) / max(1, len(ordinary)),
        mean_added_wait_ms=sum(wait_ms) / max(1, len(wait_ms)),
        us_per_decision=elapsed / (repeat * len(rows)) * 1e6,
        misses=[r for r, d in incomplete if not d.hold],
        false_holds=[r for r, d in finished if d.hold],
    )


def _domain_config(domain: str) -> IdentifierHoldConfig:
    return IdentifierHoldConfig.for_domain(domain)


def _baseline_config(domain: str) -> IdentifierHoldConfig:
    return IdentifierHoldConfig.length_rules_only(
        extra_wait_secs=IdentifierHoldConfig.for_domain(domain).extra_wait_secs
    )


def _report(corpus: Path, repeat: int) -> tuple[Scores, Scores]:
    rows = load_corpus(corpus)
    counts = {label: sum(r.label == label for r in rows) for label in ("incomplete", "complete", "ordinary")}
    print(f"corpus: {corpus} ({len(rows)} endings: {counts})")
    ours = evaluate("domain rules", rows, _domain_config, repeat)
    base = evaluate("length rules (baseline)", rows, _baseline_config, repeat)

    header = (
        f"{'rules':26} {'catch':>7} {'false-hold complete':>20} {'false-hold ordinary':>20} "
        f"{'mean added wait':>16} {'µs/decision':>12}"
    )
    print(header)
    for s in (ours, base):
        print(
            f"{s.name:26} {s.catch_rate:7.1%} {s.false_hold_complete:20.1%} {s.false_hold_ordinary:20.1%} "
            f"{s.mean_added_wait_ms:13.0f} ms {s.us_per_decision:12.1f}"
        )
    print(
        f"ratios vs baseline: catch x{ours.catch_rate / max(base.catch_rate, 1e-9):.2f}, "
        f"false holds on complete x{ours.false_hold_complete / max(base.false_hold_complete, 1e-9):.2f}, "
        f"added wait x{ours.mean_added_wait_ms / max(base.mean_added_wait_ms, 1e-9):.2f}, "
        f"cost x{ours.us_per_decision / max(base.us_per_decision, 1e-9):.2f}"
    )
    return ours, base


def print_spelling_rewrites(texts: list[str], what: str) -> None:
    """Print every rewrite the spelling normalizer makes on ``texts``, before and after (false rewrites show here)."""
    rewrites = [result for result in map(normalize_spelling, texts) if result.changed]
    print(f"spelling normalizer on {what}: {len(rewrites)} of {len(texts)} rewritten")
    for result in rewrites:
        print(f"  {result.before!r} -> {result.after!r} ({', '.join(result.rules)})")


def _print_misses(scores: Scores) -> None:
    for row in scores.misses:
        print(f"  missed      [{row.domain}/{row.shape}] {row.text}")
    for row in scores.false_holds:
        print(f"  false hold  [{row.domain}/{row.shape}] {row.text}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeat", type=int, default=20, help="timing passes over the corpus")
    parser.add_argument("--show-misses", action="store_true", help="list missed and falsely held endings")
    parser.add_argument("--audio", action="store_true", help="run on the audio corpus (needs the [audio] extra)")
    parser.add_argument("--limit", type=int, default=None, help="with --audio: only the first N utterances")
    parser.add_argument("--jobs", type=int, default=1, help="with --audio: worker processes")
    parser.add_argument("--recorded-only", action="store_true",
                        help="with --audio: only utterances already synthesised and recognised (no model work)")
    parser.add_argument("--matrix", action="store_true",
                        help="the speech matrix (voices x recognisers x channels) on the dev and test splits")
    parser.add_argument("--split", choices=("dev", "test", "both"), default="both", help="with --matrix")
    parser.add_argument("--cells", default="", help="with --matrix: only cells whose voice/recogniser/channel "
                        "contains each comma-separated text")
    parser.add_argument("--per-shape", default="2,1", help="with --matrix: split,complete rows per shape "
                        "('all': every row)")
    parser.add_argument("--markdown", action="store_true", help="with --matrix: also print the README table")
    parser.add_argument("--record-only", action="store_true", help="with --matrix: fill the cache, no replays")
    args = parser.parse_args(argv)
    if args.matrix:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_input_matrix import run_matrix

        splits = ("dev", "test") if args.split == "both" else (args.split,)
        per_shape = None if args.per_shape == "all" else tuple(int(n) for n in args.per_shape.split(","))
        scores = run_matrix(splits, jobs=args.jobs, cells=args.cells, record_only=args.record_only,
                            show_misses=args.show_misses, per_shape=per_shape,
                            markdown=args.markdown)  # type: ignore[arg-type]
        return 0 if all(s.met for s in scores if s.split == "test") else 1
    if args.audio:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_input_audio import run_audio_benchmark

        arms = run_audio_benchmark(args.limit, show_misses=args.show_misses, jobs=args.jobs,
                                   recorded_only=args.recorded_only)
        on = [a for a in arms if a.hold]
        return 0 if all(a.caught >= 0.95 * a.splits for a in on) else 1

    ours, _ = _report(args.corpus, args.repeat)
    print_spelling_rewrites([row.text for row in load_corpus(args.corpus)], "the corpus")
    huge = "my order number is W two three " * 4000
    start = time.perf_counter()
    decision = hold_decision(huge, IdentifierHoldConfig.for_domain("retail"))
    print(f"{len(huge):,}-character transcript: {(time.perf_counter() - start) * 1e6:.0f} µs (hold={decision.hold})")
    targets_met = ours.catch_rate >= 0.97 and ours.false_hold_complete <= 0.02
    print(f"targets (catch >= 97%, false hold <= 2%): {'met' if targets_met else 'NOT met'}")
    if args.show_misses:
        _print_misses(ours)
    if args.corpus == DEFAULT_CORPUS and HOLDOUT_CORPUS.exists():
        print()
        print("holdout (written apart from the rule development; its first run found the phone-format and")
        print("trailing-'at' gaps fixed since, so it is no longer untouched):")
        holdout, _ = _report(HOLDOUT_CORPUS, args.repeat)
        print_spelling_rewrites([row.text for row in load_corpus(HOLDOUT_CORPUS)], "the holdout")
        if args.show_misses:
            _print_misses(holdout)
    return 0 if targets_met else 1


if __name__ == "__main__":
    sys.exit(main())
