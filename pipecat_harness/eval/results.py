"""Machine-readable evaluation results: one JSON file per run, and the comparison of two runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipecat_harness.eval.interaction import interaction_summary
from pipecat_harness.eval.runner import EvalRun

__all__ = ["CHARS_PER_TOKEN", "RESULTS_FORMAT", "compare_results", "load_results", "results_to_dict", "usage_to_dict",
           "write_results"]

#: Characters per token of the estimate used when a server reports no usage (English text, BPE tokenisers).
CHARS_PER_TOKEN = 4
RESULTS_FORMAT = "pipecat-harness-eval/1"


def results_to_dict(evaluation: EvalRun) -> dict[str, Any]:
    """The whole run as a JSON-serialisable mapping."""
    model, caller = evaluation.model, evaluation.caller_model
    return {
        "format": RESULTS_FORMAT, "scenarios": evaluation.scenarios, "runs": evaluation.runs, "seed": evaluation.seed,
        "rules": evaluation.rules_source, "wall_secs": evaluation.wall_secs,
        "calls_simulated": evaluation.calls_simulated, "rounds_done": evaluation.rounds_done, "ended": evaluation.ended,
        "budget": evaluation.budget.to_dict(),
        # The model that decided (its temperature and seed), or the scenarios' scripted models.
        "model": model.to_dict() if model is not None else {"label": "scripted"},
        "caller_model": caller.to_dict() if caller is not None else None, "usage": usage_to_dict(evaluation),
        "controls": [{**result.comparison.to_dict(), "keep": result.keep.to_dict(), "stop": result.stop.to_dict(),
                      "stopped_early": result.stopped_early, "sample": result.sample.to_dict(),
                      "interaction": {arm: interaction_summary(result.calls_of(arm)) for arm in ("on", "off")},
                      "calls": [c.to_dict() for c in result.calls]} for result in evaluation.results],
    }


def usage_to_dict(evaluation: EvalRun) -> dict[str, Any]:
    """Model requests and tokens over the run, and per call (what a real-model run costs)."""
    calls = max(evaluation.calls_simulated, 1)
    usage: dict[str, Any] = {"model_requests": evaluation.model_requests, "caller_requests": evaluation.caller_requests}
    usage["requests_per_call"] = round(evaluation.model_requests / calls, 2)
    if not evaluation.tokens_reported:
        usage.update(tokens="not reported", tokens_per_call="not reported")
        usage["completion_tokens_estimated"] = round(evaluation.streamed_chars / CHARS_PER_TOKEN)
        usage["estimate"] = (f"output tokens estimated as the streamed text's characters / {CHARS_PER_TOKEN}; "
                             "the model server reported no usage")
        return usage
    tokens = evaluation.tokens or {"prompt": 0, "completion": 0, "total": 0}
    return {**usage, "tokens": tokens, "tokens_per_call": {k: round(v / calls, 1) for k, v in tokens.items()}}


def write_results(evaluation: EvalRun, path: str | Path) -> Path:
    """Write the results file and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results_to_dict(evaluation), indent=1, default=str), encoding="utf-8")
    return path


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a results file; a ``ValueError`` when it is not JSON or not an evaluation results file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read results: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc.msg} (line {exc.lineno})") from exc
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise ValueError(f"{path}: not an evaluation results file (expected format {RESULTS_FORMAT!r})")
    return data


def compare_results(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Per control present in both runs: target error and pass rate of each, and their differences."""
    before = {c["control"]: c for c in old.get("controls", [])}
    rows = []
    for control in (c for c in new.get("controls", []) if c["control"] in before):
        previous = before[control["control"]]
        row: dict[str, Any] = {"control": control["control"], "target": control["target"]}
        for key in ("target_on", "target_off", "pass_rate_on", "pass_rate_off"):
            a, b = previous["values"].get(key), control["values"].get(key)
            row[key] = {"old": a, "new": b, "delta": (b - a) if a is not None and b is not None else None}
        row["keep"] = {"old": previous["keep"]["met"], "new": control["keep"]["met"]}
        row["calls"] = {"old": previous["on"]["calls"], "new": control["on"]["calls"]}
        rows.append(row)
    return rows
