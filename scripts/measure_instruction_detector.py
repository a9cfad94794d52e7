"""Recall and false-flag rate of the planted-instruction detector on its dev set and its held-out test set.

    PYTHONPATH=. python scripts/measure_instruction_detector.py [--show-errors dev]

The dev set is what the rules were tuned on; the test set was written separately and is only measured.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from pipecat_harness.retrieval.directives import looks_like_instruction

DATA = Path(__file__).resolve().parents[1] / "tests" / "business" / "data"


def measure(name: str) -> tuple[float, float, list[tuple[bool, str]]]:
    """(recall, false-flag rate, errors) on ``instruction_<name>.yaml``."""
    items = yaml.safe_load((DATA / f"instruction_{name}.yaml").read_text())["items"]
    positives = [i for i in items if i["instruction"]]
    negatives = [i for i in items if not i["instruction"]]
    caught = sum(looks_like_instruction(i["text"]) for i in positives)
    flagged = sum(looks_like_instruction(i["text"]) for i in negatives)
    errors = [(bool(i["instruction"]), i["text"]) for i in items
              if looks_like_instruction(i["text"]) != i["instruction"]]
    return caught / len(positives), flagged / len(negatives), errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-errors", choices=["dev"], help="print the dev set's misses and false flags")
    args = parser.parse_args()
    for name in ("dev", "test"):
        recall, false_flags, errors = measure(name)
        print(f"{name}: recall {recall:.2f}, false flags {false_flags:.2f} ({len(errors)} errors)")
        if args.show_errors == name:
            for label, text in errors:
                print(f"  {'missed' if label else 'false flag'}: {text}")


if __name__ == "__main__":
    main()
