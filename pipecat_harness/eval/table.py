"""The terminal tables of an evaluation: one per toggled control, with sample sizes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from pipecat_harness.eval.interaction import interaction_rows
from pipecat_harness.eval.intervals import format_interval
from pipecat_harness.eval.results import CHARS_PER_TOKEN
from pipecat_harness.eval.rules import RuleVerdict
from pipecat_harness.eval.runner import ControlResult, EvalRun
from pipecat_harness.eval.summary import ArmSummary, Figure

__all__ = ["ROWS", "format_figure", "print_comparison", "print_interaction", "print_report", "row_cells", "run_lines"]

#: (group, label, figure name, kind): ``rate`` shows count/of, ``total`` shows a sum and per-call mean.
ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("input waiting", "incomplete identifiers submitted early", "identifiers_submitted_early", "rate"),
    ("input waiting", "complete turns needlessly delayed", "needless_delays", "rate"),
    ("input waiting", "total added wait (ms)", "added_wait_ms", "total"),
    ("tool checks", "duplicate writes executed", "duplicate_writes_executed", "rate"),
    ("tool checks", "duplicates prevented", "duplicates_prevented", "rate"),
    ("tool checks", "disallowed actions prevented", "disallowed_prevented", "rate"),
    ("tool checks", "held until an earlier write settled", "held_until_settled", "rate"),
    ("tool checks", "false blocks", "false_blocks", "rate"),
    ("tool checks", "lookups", "lookups", "total"),
    ("tool checks", "follow-up questions", "follow_up_questions", "total"),
    ("history", "unplayed text retained (turns)", "unplayed_text_retained", "rate"),
    ("history", "unplayed words retained", "unplayed_words_retained", "total"),
    ("history", "played text removed (turns)", "played_text_removed", "rate"),
    ("history", "played words removed", "played_words_removed", "total"),
    ("history", "repeated replies", "repeated_replies", "rate"),
)


def format_figure(figure: Figure, kind: str, calls: int) -> str:
    """A cell: ``count/of = rate · n calls`` or ``total (mean/call) · n calls``."""
    if kind == "total":
        return f"{figure.count:g} ({figure.count / calls if calls else 0.0:.2f}/call) · {calls} calls"
    if not figure.of:
        return f"0/0 · {figure.calls} calls"
    rate = f"{figure.rate:.0%} {format_interval(figure.interval)}".rstrip()
    return f"{figure.count:g}/{figure.of:g} = {rate} · {figure.calls} calls"


def _outcome(arm: ArmSummary) -> str:
    rate = f"{arm.pass_rate:.0%} {format_interval(arm.pass_rate_interval)}" if arm.pass_rate is not None else "n/a"
    errors = f", {arm.errors} sim errors" if arm.errors else ""
    return f"{arm.passed}/{arm.calls} = {rate} passed{errors}"


def row_cells(result: ControlResult) -> list[tuple[str, str, str, str, str]]:
    """Rows of one control's table: (group, label, role, on cell, off cell)."""
    comparison = result.comparison
    on, off, costs = comparison.on, comparison.off, {c.removeprefix("extra_") for c in comparison.costs}
    role = "target" if comparison.target == "failed_calls" else ""
    rows = [("outcome", "business outcome (scenario passed)", role, _outcome(on), _outcome(off))]
    for group, label, name, kind in ROWS:
        role = "target" if name == comparison.target else ("cost" if name in costs else "")
        on_cell, off_cell = (format_figure(arm.figures[name], kind, arm.calls) for arm in (on, off))
        rows.append((group, label, role, on_cell, off_cell))
    if on.out_of_the_way is not None:
        off_cell = format_figure(off.out_of_the_way, "rate", off.calls) if off.out_of_the_way else ""
        label = f"acted where it should stay out ({result.control})"
        rows.append(("outcome", label, "cost", format_figure(on.out_of_the_way, "rate", on.calls), off_cell))
    return rows


def _verdict_lines(title: str, verdict: RuleVerdict) -> list[str]:
    checks = [f"  [{'x' if c.met else ' '}] {c.condition}  ({c.detail})" for c in verdict.checks]
    return [f"{title}: {'MET' if verdict.met else 'not met'}", *checks]


def run_lines(evaluation: EvalRun) -> list[str]:
    """What decided, how far the run went and why it ended, and what it cost at the model."""
    decided, model, caller = "scripted model", evaluation.model, evaluation.caller_model
    if model is not None:
        limit = f", max tokens {model.max_tokens}" if model.max_tokens else ", no max tokens"
        url = f", {model.base_url}" if model.base_url else ""
        decided = f"model {model.label} (temperature {model.temperature:g}, seed {model.seed}{limit}{url})"
    callers = f"{caller.label} (seed {evaluation.seed})" if caller else "offline brain"
    calls, tokens = max(evaluation.calls_simulated, 1), evaluation.tokens or {}
    if evaluation.tokens_reported:
        total, prompt, completion = (tokens.get(k, 0) for k in ("total", "prompt", "completion"))
        spent = f"{total} tokens ({total / calls:.0f}/call: {prompt / calls:.0f} in, {completion / calls:.0f} out)"
    else:
        spent = (f"tokens not reported by the model (about {evaluation.streamed_chars / CHARS_PER_TOKEN:.0f} output "
                 "tokens estimated from the streamed text)")
    requests = f"{evaluation.model_requests} requests ({evaluation.model_requests / calls:.1f}/call)"
    caller_requests = f"; caller model: {evaluation.caller_requests} requests" if evaluation.caller_requests else ""
    rounds = f"{evaluation.rounds_done} of {evaluation.runs} round(s) run: {evaluation.ended}"
    return [f"{decided}; goal callers: {callers}", rounds, f"model usage: {requests}, {spent}{caller_requests}"]


def _print_lines(console: Console, lines: Iterable[str]) -> None:
    for line in lines:
        console.print(line, highlight=False, markup=False)


def print_report(evaluation: EvalRun, console: Console | None = None) -> None:
    """Print one table per toggled control, then the rule verdicts, then how the run went."""
    console = console or Console()
    for result in evaluation.results:
        comparison = result.comparison
        title = (f"{result.control}: on vs off · {len(evaluation.scenarios)} scenarios × {comparison.runs_done} run(s) "
                 f"= {comparison.on.calls} calls per arm")
        table = Table(title=title, title_justify="left", show_lines=False)
        for column in ("group", "figure", "role", "on", "off"):
            table.add_column(column, overflow="fold")
        for group, label, role, on, off in row_cells(result):
            table.add_row(group, label, role, on, off, style="bold" if role == "target" else "")
        console.print(table)
        print_interaction(result, console)
        errors = sorted({f"{c.scenario}: {c.error}" for c in result.calls if c.error})
        _print_lines(console, (f"simulation error: {line}" for line in errors[:5]))
        if len(errors) > 5:
            console.print(f"... and {len(errors) - 5} more simulation errors (see results.json)", markup=False)
        _print_lines(console, _verdict_lines("keep (minimum benefit)", result.keep))
        stop_title = "stop (regression)" + (" - run STOPPED EARLY" if result.stopped_early else "")
        _print_lines(console, _verdict_lines(stop_title, result.stop))
        if result.sample.checks:
            _print_lines(console, _verdict_lines("sample (enough calls)", result.sample))
        console.print()
    _print_lines(console, run_lines(evaluation))


def print_interaction(result: ControlResult, console: Console | None = None) -> None:
    """Print one control's interaction-cost table (both arms, from every call's timeline)."""
    table = Table(title=f"{result.control}: interaction costs, on vs off", title_justify="left")
    for column in ("figure", "on", "off"):
        table.add_column(column, overflow="fold")
    for row in interaction_rows(result.calls_of("on"), result.calls_of("off")):
        table.add_row(*row)
    (console or Console()).print(table)


def _pair(cell: dict[str, Any], percent: bool = False) -> str:
    shown = ["n/a" if v is None else (f"{v:.0%}" if percent else f"{v:g}") for v in (cell["old"], cell["new"])]
    return " → ".join(shown)


def print_comparison(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """Print the comparison of this run with an earlier results file."""
    columns = "control", "target", "target on (old → new)", "pass rate on (old → new)", "keep (old → new)"
    table = Table(*columns, title="compared with the earlier run", title_justify="left")
    for row in rows:
        keep = f"{row['keep']['old']} → {row['keep']['new']}"
        table.add_row(row["control"], row["target"], _pair(row["target_on"]), _pair(row["pass_rate_on"], True), keep)
    (console or Console()).print(table)
