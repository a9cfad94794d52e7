"""Interaction costs of a call, from its timeline: what the caller feels beside whether the task got done.

Measured from the ``caller`` and ``bot`` lanes of any trace (simulated or real), knowing nothing of the controls:

* **response latency**: from the end of the caller's speech (VAD's stop less its stop window) to the bot's first audio
  after it, once per stretch of caller speech the bot answered;
* **barge-ins**: caller speech starting while the bot speaks; the bot **yielded** when its audio stopped within
  :data:`YIELD_WINDOW_SECS`, and that delay is the **yield latency**;
* **talking over the caller**: seconds of bot audio while the caller speaks, and replies the bot *started* then;
* **model requests**: model inputs sent in the call.

Per arm the table also gives each domain's pass rate and their equal-weight mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pipecat_harness.trace.timeline import Timeline

if TYPE_CHECKING:
    from pipecat_harness.eval.identifier_splits import InputWaiting

__all__ = ["DOMAINS", "YIELD_WINDOW_SECS", "ArmCall", "InteractionCosts", "domain_pass_rates", "interaction_rows",
           "interaction_summary", "measure_interaction"]

#: How soon the bot must go quiet after the caller starts speaking over it for the bot to have yielded.
YIELD_WINDOW_SECS = 2.0
#: Pipecat's default VAD stop window, for traces that do not record it.
_DEFAULT_STOP_SECS = 0.2
DOMAINS = ("retail", "airline", "telecom")


@dataclass
class InteractionCosts:
    """The interaction figures of one call.

    Parameters:
        caller_stretches: Stretches of caller speech.
        response_latencies_ms: Per answered stretch, end of speech to the bot's first audio.
        barge_ins: Caller speech starting while the bot was speaking.
        yielded: Barge-ins after which the bot stopped within :data:`YIELD_WINDOW_SECS`.
        yield_latencies_ms: Per yielded barge-in, the caller's start to the bot's stop.
        talk_over_ms: Milliseconds of bot audio while the caller was speaking.
        bot_started_over_caller: Bot replies started while the caller was speaking.
        model_requests: Model inputs sent during the call.
    """

    caller_stretches: int = 0
    response_latencies_ms: list[int] = field(default_factory=list)
    barge_ins: int = 0
    yielded: int = 0
    yield_latencies_ms: list[int] = field(default_factory=list)
    talk_over_ms: int = 0
    bot_started_over_caller: int = 0
    model_requests: int = 0

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return asdict(self)


def _caller_speech(timeline: Timeline) -> list[tuple[float, float]]:
    stretches: list[tuple[float, float]] = []
    start: float | None = None
    for event in timeline.of("speech_started", "speech_stopped", lane="caller"):
        if event.kind == "speech_started":
            start = event.t if start is None else start
        elif start is not None:
            stop_secs = float(event.data.get("stop_secs") or _DEFAULT_STOP_SECS)
            stretches.append((start, max(start, event.t - stop_secs)))
            start = None
    return stretches


def _bot_audio(timeline: Timeline) -> list[tuple[float, float]]:
    end = timeline.events[-1].t if timeline.events else None
    return timeline.spans("bot_started_speaking", "bot_stopped_speaking", lane="bot", open_until=end)


def measure_interaction(timeline: Timeline) -> InteractionCosts:
    """Measure one call's interaction costs from its trace."""
    caller = _caller_speech(timeline)
    bot = _bot_audio(timeline)
    costs = InteractionCosts(caller_stretches=len(caller), model_requests=len(timeline.of("model_input")))
    bot_starts = [b_start for b_start, _ in bot]
    for index, (s_start, s_end) in enumerate(caller):
        next_speech = caller[index + 1][0] if index + 1 < len(caller) else float("inf")
        answer = next((b for b in bot_starts if s_end <= b < next_speech), None)
        if answer is not None:
            costs.response_latencies_ms.append(round((answer - s_end) * 1000))
        over = [(b_start, b_stop) for b_start, b_stop in bot if b_start < s_start <= b_stop]
        if over:
            costs.barge_ins += 1
            delay = over[0][1] - s_start
            if delay <= YIELD_WINDOW_SECS:
                costs.yielded += 1
                costs.yield_latencies_ms.append(round(delay * 1000))
        for b_start, b_stop in bot:
            overlap = min(s_end, b_stop) - max(s_start, b_start)
            if overlap > 0:
                costs.talk_over_ms += round(overlap * 1000)
            if s_start < b_start < s_end:
                costs.bot_started_over_caller += 1
    return costs


def _percentile(values: Sequence[int], share: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class ArmCall(Protocol):
    """What the figures of an arm read of each call (a :class:`~pipecat_harness.eval.metrics.CallMetrics`)."""

    domain: str
    passed: bool
    input: InputWaiting
    interaction: InteractionCosts


def domain_pass_rates(calls: Sequence[ArmCall]) -> dict[str, Any]:
    """Passed/calls per domain and the equal-weight mean of the domain pass rates."""
    rates: dict[str, Any] = {}
    for domain in sorted({c.domain for c in calls}, key=lambda d: (*DOMAINS, d).index(d)):
        mine = [c for c in calls if c.domain == domain]
        rates[domain] = {"passed": sum(c.passed for c in mine), "calls": len(mine),
                         "rate": sum(c.passed for c in mine) / len(mine)}
    means = [r["rate"] for r in rates.values()]
    return {"domains": rates, "equal_weight_mean": sum(means) / len(means) if means else None}


def interaction_summary(calls: Sequence[ArmCall]) -> dict[str, Any]:
    """One arm's interaction figures (what ``results.json`` records)."""
    latencies = [ms for c in calls for ms in c.interaction.response_latencies_ms]
    yields = [ms for c in calls for ms in c.interaction.yield_latencies_ms]
    n = len(calls)
    return {
        "calls": n,
        "responses": len(latencies),
        "response_latency_ms": {"p50": _percentile(latencies, 0.5), "p90": _percentile(latencies, 0.9),
                                "mean": round(sum(latencies) / len(latencies)) if latencies else None},
        "barge_ins": sum(c.interaction.barge_ins for c in calls),
        "yielded": sum(c.interaction.yielded for c in calls),
        "yield_latency_ms": {"p50": _percentile(yields, 0.5), "max": max(yields) if yields else None},
        "talk_over_ms": sum(c.interaction.talk_over_ms for c in calls),
        "bot_started_over_caller": sum(c.interaction.bot_started_over_caller for c in calls),
        "model_requests": sum(c.interaction.model_requests for c in calls),
        "model_requests_per_call": sum(c.interaction.model_requests for c in calls) / n if n else None,
        "added_wait_ms": sum(c.input.added_wait_ms for c in calls),
        "pass_rates": domain_pass_rates(calls),
    }


def _ms(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,} ms".replace(",", " ")


def _cells(summary: dict[str, Any]) -> list[tuple[str, str]]:
    n = summary["calls"] or 1
    latency = summary["response_latency_ms"]
    barge, yielded = summary["barge_ins"], summary["yielded"]
    rate = f"{yielded}/{barge} = {yielded / barge:.0%}" if barge else "0/0"
    rows = [
        ("response latency p50 / p90", f"{_ms(latency['p50'])} / {_ms(latency['p90'])} · {summary['responses']} "
         "responses"),
        ("yield rate after a barge-in", f"{rate} · yield latency p50 {_ms(summary['yield_latency_ms']['p50'])}"),
        ("bot talking over the caller", f"{_ms(summary['talk_over_ms'])} ({summary['talk_over_ms'] / n:.0f} ms/call)"
         f" · {summary['bot_started_over_caller']} replies started over the caller"),
        ("model requests per call", f"{summary['model_requests_per_call'] or 0:.2f} ({summary['model_requests']} "
         "requests)"),
        ("added waiting", f"{_ms(summary['added_wait_ms'])} ({summary['added_wait_ms'] / n:.0f} ms/call)"),
    ]
    rates = summary["pass_rates"]
    for domain, figure in rates["domains"].items():
        rows.append((f"passed: {domain}", f"{figure['passed']}/{figure['calls']} = {figure['rate']:.0%}"))
    mean = rates["equal_weight_mean"]
    rows.append(("passed: equal-weight mean of domains", "n/a" if mean is None else f"{mean:.1%}"))
    return rows


def interaction_rows(on_calls: Sequence[ArmCall], off_calls: Sequence[ArmCall]) -> list[tuple[str, str, str]]:
    """The interaction-cost table of two arms: (figure, on cell, off cell)."""
    on, off = _cells(interaction_summary(on_calls)), _cells(interaction_summary(off_calls))
    off_cells = dict(off)
    return [(label, cell, off_cells.get(label, "")) for label, cell in on] + [
        (label, "", cell) for label, cell in off if label not in dict(on)]
