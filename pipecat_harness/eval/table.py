"""The terminal tables of an evaluation: one per toggled control, with sample sizes."""

from __future__ import annotations

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
        mean = figure.count / calls if calls else 0.0
        return f"{figure.count:g} ({mean:.2f}/call) · {calls} calls"
    if not figure.of:
        return f"0/0 · {figure.calls} calls"
    interval = format_interval(figure.interval)
    rate = f"{figure.rate:.0%} {interval}" if interval else f"{figure.rate:.0%}"
    return f"{figure.count:g}/{figure.of:g} = {rate} · {figure.calls} calls"


def _outcome(arm: ArmSummary) -> str:
    rate = f"{arm.pass_rate:.0%} {format_interval(arm.pass_rate_interval)}" if arm.pass_rate is not None else "n/a"
    errors = f", {arm.errors} sim errors" if arm.errors else ""
    return f"{arm.passed}/{arm.calls} = {rate} passed{errors}"


def row_cells(result: ControlResult) -> list[tuple[str, str, str, str, str]]:
    """Rows of one control's table: (group, label, role, on cell, off cell)."""
    comparison = result.comparison
    costs = {c.removeprefix("extra_") for c in comparison.costs}
    rows = [("outcome", "business outcome (scenario passed)", "target" if comparison.target == "failed_calls" else "",
             _outcome(comparison.on), _outcome(comparison.off))]
    for group, label, name, kind in ROWS:
        role = "target" if name == comparison.target else ("cost" if name in costs else "")
        rows.append((group, label, role, format_figure(comparison.on.figures[name], kind, comparison.on.calls),
                     format_figure(comparison.off.figures[name], kind, comparison.off.calls)))
    if comparison.on.out_of_the_way is not None:
        fig = comparison.on.out_of_the_way
        off = comparison.off.out_of_the_way
        rows.append(("outcome", f"acted where it should stay out ({result.control})", "cost",
                     format_figure(fig, "rate", comparison.on.calls),
                     format_figure(off, "rate", comparison.off.calls) if off else ""))
    return rows


def _verdict_lines(title: str, verdict: RuleVerdict) -> list[str]:
    lines = [f"{title}: {'MET' if verdict.met else 'not met'}"]
    lines += [f"  [{'x' if c.met else ' '}] {c.condition}  ({c.detail})" for c in verdict.checks]
    return lines


def run_lines(evaluation: EvalRun) -> list[str]:
    """What decided, how far the run went and why it ended, and what it cost at the model."""
    model = evaluation.model
    decided = (f"model {model.label} (temperature {model.temperature:g}, seed {model.seed}"
               + (f", max tokens {model.max_tokens}" if model.max_tokens else ", no max tokens")
               + (f", {model.base_url}" if model.base_url else "") + ")") if model else "scripted model"
    caller = evaluation.caller_model
    lines = [f"{decided}; goal callers: " + (f"{caller.label} (seed {evaluation.seed})" if caller
                                             else "offline brain"),
             f"{evaluation.rounds_done} of {evaluation.runs} round(s) run: {evaluation.ended}"]
    calls = max(evaluation.calls_simulated, 1)
    tokens = evaluation.tokens or {}
    if evaluation.tokens_reported:
        spent = (f"{tokens.get('total', 0)} tokens ({tokens.get('total', 0) / calls:.0f}/call: "
                 f"{tokens.get('prompt', 0) / calls:.0f} in, {tokens.get('completion', 0) / calls:.0f} out)")
    else:
        estimate = evaluation.streamed_chars / CHARS_PER_TOKEN
        spent = (f"tokens not reported by the model (about {estimate:.0f} output tokens estimated from the "
                 "streamed text)")
    lines.append(f"model usage: {evaluation.model_requests} requests ({evaluation.model_requests / calls:.1f}/call), "
                 + spent
                 + (f"; caller model: {evaluation.caller_requests} requests" if evaluation.caller_requests else ""))
    return lines


def print_report(evaluation: EvalRun, console: Console | None = None) -> None:
    """Print one table per toggled control, then the rule verdicts, then how the run went."""
    console = console or Console()
    for result in evaluation.results:
        comparison = result.comparison
        title = (f"{result.control}: on vs off · {len(evaluation.scenarios)} scenarios × "
                 f"{comparison.runs_done} run(s) = {comparison.on.calls} calls per arm")
        table = Table(title=title, title_justify="left", show_lines=False)
        for column in ("group", "figure", "role", "on", "off"):
            table.add_column(column, overflow="fold")
        for group, label, role, on, off in row_cells(result):
            style: Any = "bold" if role == "target" else ""
            table.add_row(group, label, role, on, off, style=style)
        console.print(table)
        print_interaction(result, console)
        errors = sorted({f"{c.scenario}: {c.error}" for c in result.calls if c.error})
        for line in errors[:5]:
            console.print(f"simulation error: {line}", highlight=False, markup=False)
        if len(errors) > 5:
            console.print(f"... and {len(errors) - 5} more simulation errors (see results.json)", markup=False)
        for line in _verdict_lines("keep (minimum benefit)", result.keep):
            console.print(line, highlight=False, markup=False)
        stop_title = "stop (regression)" + (" - run STOPPED EARLY" if result.stopped_early else "")
        for line in _verdict_lines(stop_title, result.stop):
            console.print(line, highlight=False, markup=False)
        if result.sample.checks:
            for line in _verdict_lines("sample (enough calls)", result.sample):
                console.print(line, highlight=False, markup=False)
        console.print()
    for line in run_lines(evaluation):
        console.print(line, highlight=False, markup=False)


def print_interaction(result: ControlResult, console: Console | None = None) -> None:
    """Print one control's interaction-cost table (both arms, from every call's timeline)."""
    console = console or Console()
    on = [c for c in result.calls if c.arm == "on"]
    off = [c for c in result.calls if c.arm == "off"]
    table = Table(title=f"{result.control}: interaction costs, on vs off", title_justify="left")
    for column in ("figure", "on", "off"):
        table.add_column(column, overflow="fold")
    for label, on_cell, off_cell in interaction_rows(on, off):
        table.add_row(label, on_cell, off_cell)
    console.print(table)


def print_comparison(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """Print the comparison of this run with an earlier results file."""
    console = console or Console()
    table = Table(title="compared with the earlier run", title_justify="left")
    for column in ("control", "target", "target on (old → new)", "pass rate on (old → new)", "keep (old → new)"):
        table.add_column(column)

    def pair(cell: dict[str, Any], percent: bool = False) -> str:
        def show(v: Any) -> str:
            return "n/a" if v is None else (f"{v:.0%}" if percent else f"{v:g}")
        return f"{show(cell['old'])} → {show(cell['new'])}"

    for row in rows:
        table.add_row(row["control"], row["target"], pair(row["target_on"]), pair(row["pass_rate_on"], True),
                      f"{row['keep']['old']} → {row['keep']['new']}")
    console.print(table)
