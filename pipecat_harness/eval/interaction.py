"""Interaction costs of a call from the ``caller`` and ``bot`` lanes of any trace, knowing nothing of the controls.

**Response latency** runs from the end of the caller's speech (VAD's stop less its stop window) to the bot's first audio
after it; a **barge-in** is caller speech starting while the bot speaks, and the bot **yielded** when its audio stopped
within :data:`YIELD_WINDOW_SECS` (the **yield latency**); **talking over** counts bot audio while the caller speaks,
and the replies the bot started then; **model requests** are the model inputs sent.
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
    """The interaction figures of one call, as the module defines them (latencies in ms, per answer and per yield)."""

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


def measure_interaction(timeline: Timeline) -> InteractionCosts:
    """Measure one call's interaction costs from its trace."""
    caller = _caller_speech(timeline)
    end = timeline.events[-1].t if timeline.events else None
    bot = timeline.spans("bot_started_speaking", "bot_stopped_speaking", lane="bot", open_until=end)
    costs = InteractionCosts(caller_stretches=len(caller), model_requests=len(timeline.of("model_input")))
    for index, (s_start, s_end) in enumerate(caller):
        next_speech = caller[index + 1][0] if index + 1 < len(caller) else float("inf")
        answer = next((b_start for b_start, _ in bot if s_end <= b_start < next_speech), None)
        if answer is not None:
            costs.response_latencies_ms.append(round((answer - s_end) * 1000))
        over = [b_stop for b_start, b_stop in bot if b_start < s_start <= b_stop]
        if over:
            costs.barge_ins += 1
            if over[0] - s_start <= YIELD_WINDOW_SECS:
                costs.yielded += 1
                costs.yield_latencies_ms.append(round((over[0] - s_start) * 1000))
        for b_start, b_stop in bot:
            overlap = min(s_end, b_stop) - max(s_start, b_start)
            costs.talk_over_ms += round(overlap * 1000) if overlap > 0 else 0
            costs.bot_started_over_caller += s_start < b_start < s_end
    return costs


def _percentile(values: Sequence[int], share: float) -> int | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else None


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
        passed = sum(c.passed for c in mine)
        rates[domain] = {"passed": passed, "calls": len(mine), "rate": passed / len(mine)}
    means = [r["rate"] for r in rates.values()]
    return {"domains": rates, "equal_weight_mean": sum(means) / len(means) if means else None}


def interaction_summary(calls: Sequence[ArmCall]) -> dict[str, Any]:
    """One arm's interaction figures (what ``results.json`` records)."""
    latencies = [ms for c in calls for ms in c.interaction.response_latencies_ms]
    yields = [ms for c in calls for ms in c.interaction.yield_latencies_ms]
    requests = sum(c.interaction.model_requests for c in calls)
    mean = round(sum(latencies) / len(latencies)) if latencies else None
    return {
        "calls": len(calls), "responses": len(latencies),
        "response_latency_ms": {"p50": _percentile(latencies, 0.5), "p90": _percentile(latencies, 0.9), "mean": mean},
        "barge_ins": sum(c.interaction.barge_ins for c in calls), "yielded": sum(c.interaction.yielded for c in calls),
        "yield_latency_ms": {"p50": _percentile(yields, 0.5), "max": max(yields) if yields else None},
        "talk_over_ms": sum(c.interaction.talk_over_ms for c in calls),
        "bot_started_over_caller": sum(c.interaction.bot_started_over_caller for c in calls),
        "model_requests": requests, "model_requests_per_call": requests / len(calls) if calls else None,
        "added_wait_ms": sum(c.input.added_wait_ms for c in calls), "pass_rates": domain_pass_rates(calls)}


def _ms(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,} ms".replace(",", " ")


def _cells(summary: dict[str, Any]) -> dict[str, str]:
    n, latency, yield_p50 = summary["calls"] or 1, summary["response_latency_ms"], summary["yield_latency_ms"]["p50"]
    barge, yielded = summary["barge_ins"], summary["yielded"]
    rate = f"{yielded}/{barge} = {yielded / barge:.0%}" if barge else "0/0"
    talk_over, wait, requests = summary["talk_over_ms"], summary["added_wait_ms"], summary["model_requests"]
    rates, mean = summary["pass_rates"], summary["pass_rates"]["equal_weight_mean"]
    return {
        "response latency p50 / p90": f"{_ms(latency['p50'])} / {_ms(latency['p90'])} · {summary['responses']} "
        "responses",
        "yield rate after a barge-in": f"{rate} · yield latency p50 {_ms(yield_p50)}",
        "bot talking over the caller": f"{_ms(talk_over)} ({talk_over / n:.0f} ms/call) · "
        f"{summary['bot_started_over_caller']} replies started over the caller",
        "model requests per call": f"{summary['model_requests_per_call'] or 0:.2f} ({requests} requests)",
        "added waiting": f"{_ms(wait)} ({wait / n:.0f} ms/call)",
        **{f"passed: {d}": f"{f['passed']}/{f['calls']} = {f['rate']:.0%}" for d, f in rates["domains"].items()},
        "passed: equal-weight mean of domains": "n/a" if mean is None else f"{mean:.1%}",
    }


def interaction_rows(on_calls: Sequence[ArmCall], off_calls: Sequence[ArmCall]) -> list[tuple[str, str, str]]:
    """The interaction-cost table of two arms: (figure, on cell, off cell)."""
    on, off = _cells(interaction_summary(on_calls)), _cells(interaction_summary(off_calls))
    return [(label, on.get(label, ""), off.get(label, "")) for label in {**on, **off}]
