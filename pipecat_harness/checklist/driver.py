"""``ChecklistDriver``: analyse new caller turns and decide the next directive, per call.

It is the one place where the Pipecat processor, the proxy's chat-completions
endpoint, the Retell socket and the conversation-update webhook meet: each
hands over the caller turns it has seen, and the driver analyses only those
not analysed yet, under a per-call lock, after a newest-wins debounce.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
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
        fallback_analyzer: Used when ``analyzer`` fails; ``None`` re-raises. By default
            the deterministic analyzer backs up any other analyzer.
        debounce_secs: Wait for a newer utterance before analysing (0: none).
        lock: The per-call lock (default: a 1 s lease renewed while up to 10 s of work runs).
        on_decision: Receives every decision.
        decisions_wanted: Whether ``on_decision`` takes decisions right now (a log below its
            level does not); while it says no, a turn's decision records are not even built.
            Default: whenever ``on_decision`` is set.
        state_ttl_secs: How long a call's state is kept after its last change.
        max_turns_per_sync: Most caller turns one sync analyses; a longer backlog is
            worked off over the following turns, oldest first (bounded work per request).
    """

    def __init__(
        self,
        checklist: Checklist,
        store: StateStore,
        *,
        analyzer: Analyzer | None = None,
        fallback_analyzer: Analyzer | object | None = _RULES_UNLESS_RULES,
        debounce_secs: float = 0.0,
        lock: CallLock | None = None,
        on_decision: DecisionSink | None = None,
        decisions_wanted: Callable[[], bool] | None = None,
        state_ttl_secs: float = 6 * 3600.0,
        max_turns_per_sync: int = 25,
    ) -> None:
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
        if self.on_decision is None:
            return False
        return self._decisions_wanted is None or self._decisions_wanted()

    def record(self, action: str, evidence: dict[str, Any]) -> None:
        """Pass a decision to ``on_decision`` (if any, and if it wants decisions now)."""
        if self.on_decision is not None and self.wants_decisions():
            self.on_decision(action, evidence)

    async def load(self, call_id: str) -> ChecklistState:
        """Return the call's state (a fresh one for a new call).

        Raises:
            StoreError: The stored state is corrupt.
        """
        return self._parsed(call_id, await self.store.get_json(self._key(call_id)))

    @staticmethod
    def _parsed(call_id: str, raw: Any | None) -> ChecklistState:
        return parse_record(
            raw, ChecklistState.from_dict, lambda: ChecklistState(call_id=call_id), label=f"call {call_id!r}"
        )

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

    async def sync(
        self,
        call_id: str,
        user_turns: Sequence[str],
        *,
        stamp: float | None = None,
        issue: bool = True,
        ready: asyncio.Future[Directive | None] | None = None,
    ) -> Directive | None:
        """Analyse the caller turns not analysed yet and return the next directive.

        ``user_turns`` is every caller turn of the call so far, oldest first
        (what a platform sends with each request), so a superseded request
        loses nothing: the newer one carries the same turns.

        Args:
            call_id: The call.
            user_turns: All caller utterances so far.
            stamp: When the newest utterance was heard (default: now); the
                newest stamp wins the debounce.
            issue: Record the directive as given to the model.
            ready: Receives the directive as soon as it is decided, before the
                state is saved and the lock released, so a caller can start the
                model request while that finishes (``sync`` still returns it).

        Returns:
            The directive, or ``None`` when a newer utterance superseded this one
            (no analysis was run).
        """
        turn = await self.begin(call_id, user_turns, stamp=stamp, issue=issue)
        if ready is not None and not ready.done():
            ready.set_result(turn.directive)
        await turn.finish()
        return turn.directive

    async def begin(
        self, call_id: str, user_turns: Sequence[str], *, stamp: float | None = None, issue: bool = True
    ) -> DecidedTurn:
        """Decide the directive; the save, the release and the decision records are left to ``finish``.

        The same as :meth:`sync` up to the directive: a caller that needs the
        directive first (the model request waits on it) gets it without the
        store write and the records on its path, and must then call ``finish``
        (in another task if it likes). Without a debounce wait the stamp is
        offered, the lock taken and the state read in one store operation: one
        round trip on Redis.
        """
        stamp = time.time() if stamp is None else stamp
        offered = self.debouncer.delay_secs > 0
        if offered and not await self.debouncer.settle(call_id, stamp):
            self.record("superseded", {"stamp": stamp, "turns": len(user_turns)})
            return DecidedTurn(self, None)
        gate = self.debouncer.gate(call_id, stamp, offer=not offered)
        try:
            held = await self.lock.acquire_reading(call_id, (self._key(call_id),), gate=gate)
        except Superseded:
            self.record("superseded", {"stamp": stamp, "turns": len(user_turns)})
            return DecidedTurn(self, None)
        try:
            if not self._analysis_never_waits():
                async with asyncio.timeout(self.lock.work_timeout_secs):
                    return await self._decide(held, call_id, user_turns, issue)
            return await self._decide(held, call_id, user_turns, issue)
        except BaseException:
            await held.release()
            raise

    def _analysis_never_waits(self) -> bool:
        """Whether deciding cannot wait on anything: the stock rule analysis, with no fallback or a rule one.

        Then the work deadline (a timer per turn) has nothing to bound: the
        decision runs through without waiting, a backlog in bounded steps.
        """
        fallback = self.fallback_analyzer
        return type(self.analyzer).analyze is _RULE_ANALYSIS and (
            fallback is None or type(fallback).analyze is _RULE_ANALYSIS
        )

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
                # A backlog of turns (a restart, a replayed transcript) is analysed a turn at a
                # time with the loop free in between, so other calls on this worker never wait.
                await asyncio.sleep(0)
            utterance = user_turns[index]
            analysis = await self._analyze(state, utterance)
            changes = apply_analysis(self.checklist, state, analysis)
            changed = True
            records.append(("analyzed", functools.partial(_analyzed, index + 1, utterance, analysis, changes)))
        directive = next_directive(self.checklist, state)
        if issue and mark_issued(state, directive):
            changed = True
            records.append(("directed", functools.partial(_directed, directive, state.analyzed_turns)))
        return DecidedTurn(self, directive, held=held, state=state if changed else None, records=records)


_Record = tuple[str, Callable[[], dict[str, Any]]]


def _analyzed(turn: int, utterance: str, analysis: Analysis, changes: Any) -> dict[str, Any]:
    return {"turn": turn, "utterance": utterance, "analysis": analysis.to_dict(), "changes": changes}


def _directed(directive: Directive, turn: int) -> dict[str, Any]:
    return {"directive": directive.to_dict(), "turn": turn}


class DecidedTurn:
    """A directive decided under the call's lock, with the state save and the records still to do.

    Attributes:
        directive: The directive (``None`` when a newer utterance superseded the turn).
    """

    def __init__(
        self,
        driver: ChecklistDriver,
        directive: Directive | None,
        *,
        held: HeldLock | None = None,
        state: ChecklistState | None = None,
        records: list[_Record] | None = None,
    ) -> None:
        self.directive = directive
        self._driver = driver
        self._held = held
        self._state = state
        self._records = records or []

    @property
    def pending(self) -> bool:
        """Whether :meth:`finish` still has something to do."""
        return self._held is not None

    async def finish(self) -> None:
        """Pass on the decisions, save the changed state (fenced by the lock) and release the lock.

        Raises:
            LockLost: The lock lapsed before the save; nothing was written.
        """
        held, self._held = self._held, None
        if held is None:
            return
        try:
            if self._records and self._driver.wants_decisions():
                for action, evidence in self._records:
                    self._driver.record(action, evidence())
            if self._state is not None:
                self._state.version += 1
                await held.write(
                    self._driver._key(self._state.call_id), self._state.to_json(), ttl_secs=self._driver.state_ttl_secs
                )
        finally:
            await held.release()
