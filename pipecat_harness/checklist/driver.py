"""``ChecklistDriver``: analyse new caller turns and decide the next directive, per call.

Every channel hands over the caller turns it has seen; only those not analysed yet are analysed, under a
per-call lock, after a newest-wins debounce.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipecat_harness.checklist.analysis import Analysis, Analyzer, AnalyzerError
from pipecat_harness.checklist.directive import Directive, mark_issued, next_directive
from pipecat_harness.checklist.model import Checklist
from pipecat_harness.checklist.progress import ChecklistState, apply_analysis
from pipecat_harness.checklist.rule_analyzer import RuleAnalyzer
from pipecat_harness.state.coordination import CallLock, HeldLock, Superseded, TranscriptDebouncer
from pipecat_harness.state.store import StateStore, parse_record

__all__ = ["ChecklistDriver", "DecidedTurn", "DecisionSink"]


_RULES_UNLESS_RULES = object()
_RULE_ANALYSIS = RuleAnalyzer.analyze

DecisionSink = Callable[[str, dict[str, Any]], Any]
"""Called with ``(action, evidence)`` for every decision the driver takes."""


class ChecklistDriver:
    """Keeps one checklist's per-call state in a store and produces directives.

    Args:
        checklist: The checklist to walk.
        store: Where per-call state, debounce stamps and locks live.
        analyzer: The analyzer (default: the deterministic :class:`RuleAnalyzer`).
        fallback_analyzer: Used when ``analyzer`` fails (``None`` re-raises; default: the rule analyzer).
        debounce_secs: Wait for a newer utterance before analysing (0: none).
        lock: The per-call lock (default: a 1 s lease renewed while up to 10 s of work runs).
        on_decision: Receives every decision.
        decisions_wanted: Whether ``on_decision`` takes decisions now (else records are not built; default: yes).
        state_ttl_secs: How long a call's state is kept after its last change.
        max_turns_per_sync: Most caller turns one sync analyses (a longer backlog waits for the next turns).
    """

    def __init__(self, checklist: Checklist, store: StateStore, *, analyzer: Analyzer | None = None,
                 fallback_analyzer: Analyzer | object | None = _RULES_UNLESS_RULES, debounce_secs: float = 0.0,
                 lock: CallLock | None = None, on_decision: DecisionSink | None = None,
                 decisions_wanted: Callable[[], bool] | None = None, state_ttl_secs: float = 6 * 3600.0,
                 max_turns_per_sync: int = 25) -> None:
        self.checklist = checklist
        self.store = store
        self.analyzer = analyzer or RuleAnalyzer()
        if fallback_analyzer is _RULES_UNLESS_RULES:
            fallback_analyzer = None if type(self.analyzer) is RuleAnalyzer else RuleAnalyzer()
        self.fallback_analyzer: Analyzer | None = fallback_analyzer  # type: ignore[assignment]
        self.debouncer = TranscriptDebouncer(store, delay_secs=debounce_secs)
        self.lock = lock or CallLock(store)
        self.on_decision = on_decision
        self._decisions_wanted = decisions_wanted
        self.state_ttl_secs = state_ttl_secs
        self.max_turns_per_sync = max_turns_per_sync

    def _key(self, call_id: str) -> str:
        return f"checklist:{self.checklist.name}:{call_id}"

    def wants_decisions(self) -> bool:
        """Whether a decision passed to :meth:`record` now would reach anyone."""
        return self.on_decision is not None and (self._decisions_wanted is None or self._decisions_wanted())

    def record(self, action: str, evidence: dict[str, Any]) -> None:
        """Pass a decision to ``on_decision`` (if any, and if it wants decisions now)."""
        if self.on_decision is not None and self.wants_decisions():
            self.on_decision(action, evidence)

    async def load(self, call_id: str) -> ChecklistState:
        """Return the call's state, a fresh one for a new call (``StoreError`` when the stored one is corrupt)."""
        return self._parsed(call_id, await self.store.get_json(self._key(call_id)))

    @staticmethod
    def _parsed(call_id: str, raw: Any | None) -> ChecklistState:
        return parse_record(raw, ChecklistState.from_dict, lambda: ChecklistState(call_id=call_id),
                            label=f"call {call_id!r}")

    async def save(self, state: ChecklistState) -> None:
        """Store the call's state, bumping its version (inside the call's lock: only while it is still held)."""
        state.version += 1
        await self.lock.write(self._key(state.call_id), state.to_json(), ttl_secs=self.state_ttl_secs)

    async def reset(self, call_id: str) -> None:
        """Forget a call's state."""
        await self.store.delete(self._key(call_id))

    async def current_directive(self, call_id: str) -> Directive:
        """The directive for the stored state, without analysing or recording anything."""
        return next_directive(self.checklist, await self.load(call_id))

    async def _analyze(self, state: ChecklistState, utterance: str) -> Analysis:
        try:
            return await self.analyzer.analyze(self.checklist, state, utterance)
        except AnalyzerError as exc:
            if self.fallback_analyzer is None:
                raise
            self.record("analyzer_fallback", {"error": str(exc), "fallback": self.fallback_analyzer.name})
            return await self.fallback_analyzer.analyze(self.checklist, state, utterance)

    async def sync(self, call_id: str, user_turns: Sequence[str], *, stamp: float | None = None, issue: bool = True,
                   ready: asyncio.Future[Directive | None] | None = None) -> Directive | None:
        """Analyse the caller turns not analysed yet and return the next directive.

        Args:
            call_id: The call.
            user_turns: All caller utterances so far, oldest first (a superseded request loses nothing).
            stamp: When the newest utterance was heard (default: now); the newest stamp wins the debounce.
            issue: Record the directive as given to the model.
            ready: Receives the directive once decided, before the state is saved and the lock released.

        Returns:
            The directive, or ``None`` when a newer utterance superseded this one (nothing was analysed).
        """
        turn = await self.begin(call_id, user_turns, stamp=stamp, issue=issue)
        if ready is not None and not ready.done():
            ready.set_result(turn.directive)
        await turn.finish()
        return turn.directive

    async def begin(self, call_id: str, user_turns: Sequence[str], *, stamp: float | None = None,
                    issue: bool = True) -> DecidedTurn:
        """:meth:`sync` up to the directive; the save, the release and the records are left to ``finish``.

        Without a debounce wait, the stamp is offered, the lock taken and the state read in one store round trip.
        """
        stamp = time.time() if stamp is None else stamp
        offered = self.debouncer.delay_secs > 0
        held: HeldLock | None = None
        if not offered or await self.debouncer.settle(call_id, stamp):
            gate = self.debouncer.gate(call_id, stamp, offer=not offered)
            with contextlib.suppress(Superseded):
                held = await self.lock.acquire_reading(call_id, (self._key(call_id),), gate=gate)
        if held is None:
            self.record("superseded", {"stamp": stamp, "turns": len(user_turns)})
            return DecidedTurn(self, None)
        try:
            async with asyncio.timeout(None if self._analysis_never_waits() else self.lock.work_timeout_secs):
                return await self._decide(held, call_id, user_turns, issue)
        except BaseException:
            await held.release()
            raise

    def _analysis_never_waits(self) -> bool:
        """Whether deciding never waits (the stock rule analysis, and its fallback): no work deadline to arm."""
        fallback = self.fallback_analyzer
        fallback_never_waits = fallback is None or type(fallback).analyze is _RULE_ANALYSIS
        return type(self.analyzer).analyze is _RULE_ANALYSIS and fallback_never_waits

    async def _decide(self, held: HeldLock, call_id: str, user_turns: Sequence[str], issue: bool) -> DecidedTurn:
        state = self._parsed(call_id, held.values[0])
        records: list[_Record] = []
        changed = False
        first = state.analyzed_turns
        last = min(len(user_turns), first + self.max_turns_per_sync)
        if last < len(user_turns):
            evidence = {"call_id": call_id, "analysed": last - first, "left": len(user_turns) - last}
            records.append(("backlog", lambda: evidence))
        for index in range(first, last):
            if index > first:
                await asyncio.sleep(0)  # a backlog frees the loop between turns for the other calls
            utterance = user_turns[index]
            analysis = await self._analyze(state, utterance)
            changes = apply_analysis(self.checklist, state, analysis)
            changed = True
            records.append(("analyzed", functools.partial(_analyzed, index + 1, utterance, analysis, changes)))
        directive = next_directive(self.checklist, state)
        if issue and mark_issued(state, directive):
            changed = True
            records.append(("directed", lambda: {"directive": directive.to_dict(), "turn": state.analyzed_turns}))
        return DecidedTurn(self, directive, held=held, state=state if changed else None, records=records)


_Record = tuple[str, Callable[[], dict[str, Any]]]


def _analyzed(turn: int, utterance: str, analysis: Analysis, changes: Any) -> dict[str, Any]:
    return {"turn": turn, "utterance": utterance, "analysis": analysis.to_dict(), "changes": changes}


@dataclass(eq=False)
class DecidedTurn:
    """A directive decided under the call's lock, with the state save and the records still to do.

    Attributes:
        directive: The directive (``None`` when a newer utterance superseded the turn).
    """

    driver: ChecklistDriver
    directive: Directive | None
    held: HeldLock | None = field(default=None, kw_only=True)
    state: ChecklistState | None = field(default=None, kw_only=True)
    records: list[_Record] = field(default_factory=list, kw_only=True)

    @property
    def pending(self) -> bool:
        """Whether :meth:`finish` still has something to do."""
        return self.held is not None

    async def finish(self) -> None:
        """Pass on the decisions, save the changed state and release the lock.

        The save is fenced by the lock: ``LockLost`` when it lapsed, and nothing is written.
        """
        held, self.held = self.held, None
        if held is None:
            return
        try:
            if self.records and self.driver.wants_decisions():
                for action, evidence in self.records:
                    self.driver.record(action, evidence())
            if self.state is not None:
                self.state.version += 1
                key = self.driver._key(self.state.call_id)
                await held.write(key, self.state.to_json(), ttl_secs=self.driver.state_ttl_secs)
        finally:
            await held.release()
