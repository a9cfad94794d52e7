"""``TurnGrader``: a Pipecat observer that grades every committed assistant turn off the voice loop.

A frame only queues a job (what the caller heard, with the caller's turn before it); grading, audit writes and alerts
run in the observer's own task, and a full queue gives the turn a ``not_graded`` row instead of blocking the pipeline.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from loguru import logger
from pipecat.frames.frames import FunctionCallResultFrame, LLMContextAssistantTurnFrame, LLMContextUserTurnFrame
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection

from pipecat_harness.decisions import DecisionLog
from pipecat_harness.grader.actions import InMemoryOperations
from pipecat_harness.grader.alerts import Alerter, SeverityPolicy, alert_payload
from pipecat_harness.grader.audit_row import AuditRow, AuditSink
from pipecat_harness.grader.verdict import Grader, Verdict
from pipecat_harness.tools.result import reports_done

__all__ = ["GradingJob", "TurnGrader"]


@dataclass(frozen=True)
class GradingJob:
    """One assistant turn waiting to be graded."""

    turn_id: int
    utterance: str
    caller_utterance: str | None


class TurnGrader(BaseObserver):
    """Grade committed assistant turns, write audit rows to ``audit``, send alerts through ``alerter`` (optional).

    ``call_id`` is also the ledger key of action claims; ``severity`` maps verdicts to severities and the alert
    threshold; flagged and ungraded turns go to ``decisions``; ``close_resources`` closes ``alerter`` and ``audit``.
    """

    def __init__(self, grader: Grader, *, audit: AuditSink, tenant: str, call_id: str, constraints_version: str,
                 severity: SeverityPolicy | None = None, alerter: Alerter | None = None, console_url: str | None = None,
                 queue_size: int = 256, decisions: DecisionLog | None = None, close_resources: bool = False) -> None:
        super().__init__(observe_every_push=False)
        self.grader = grader
        self.audit = audit
        self.tenant = tenant
        self.call_id = call_id
        self.constraints_version = constraints_version
        self.severity = severity or SeverityPolicy()
        self.alerter = alerter
        self.console_url = console_url
        self.decisions = decisions
        self.close_resources = close_resources
        self.rows_written = 0
        self._queue: asyncio.Queue[GradingJob] = asyncio.Queue(maxsize=queue_size)
        self._worker: asyncio.Task[None] | None = None
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._tables_ready = False
        self._turn_id = 0
        self._caller_utterance: str | None = None
        #: Tools whose result came back without an error on this call.
        self.executed = InMemoryOperations()

    async def on_push_frame(self, data: FramePushed) -> None:
        """Note caller turns; queue committed assistant turns for grading."""
        if data.direction != FrameDirection.DOWNSTREAM:
            return  # the aggregators broadcast each turn both ways; grade it once
        frame = data.frame
        if isinstance(frame, LLMContextUserTurnFrame):
            self._caller_utterance = frame.text
        elif isinstance(frame, LLMContextAssistantTurnFrame) and frame.text.strip():
            self.submit(frame.text, self._caller_utterance)
        elif isinstance(frame, FunctionCallResultFrame) and _succeeded(frame):
            self.executed.record(self.call_id, frame.function_name)

    def submit(self, utterance: str, caller_utterance: str | None = None) -> GradingJob:
        """Queue a turn for grading without waiting; a full queue gets a ``not_graded`` row."""
        self._turn_id += 1
        job = GradingJob(self._turn_id, utterance, caller_utterance)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._run(), name=f"turn-grader-{self.call_id}")
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            logger.warning(f"grader queue full on call {self.call_id}; turn {job.turn_id} not graded")
            verdict = Verdict("not_graded", utterance, "none", None, "grader queue full; turn not graded", 0.0)
            task = asyncio.get_running_loop().create_task(self._write(job, [verdict], "queue_full"))
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)
        return job

    async def drain(self, timeout_secs: float = 30.0) -> None:
        """Wait until every queued turn is graded and written (at most ``timeout_secs``)."""
        async with asyncio.timeout(timeout_secs):
            await self._queue.join()
            while self._side_tasks:
                await asyncio.gather(*list(self._side_tasks), return_exceptions=True)

    async def cleanup(self) -> None:
        """Grade what is queued (bounded), then stop the worker."""
        await super().cleanup()
        try:
            await self.drain(10.0)
        except TimeoutError:
            logger.warning(f"grader on call {self.call_id}: {self._queue.qsize()} turn(s) left ungraded at close")
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        if self.close_resources:
            if self.alerter is not None:
                await self.alerter.close()
            await self.audit.close()

    async def _run(self) -> None:
        while True:
            job = await self._queue.get()
            try:
                await self._grade(job)
            except Exception as exc:  # the worker must outlive any one bad turn
                logger.exception(f"grader failed on call {self.call_id} turn {job.turn_id}: {exc}")
            finally:
                self._queue.task_done()

    async def _grade(self, job: GradingJob) -> None:
        try:
            verdicts = list(await self.grader.grade(job.utterance, job.caller_utterance, call_id=self.call_id))
            reason = "graded"
        except Exception as exc:  # a grader error still leaves a row
            verdicts = [Verdict("not_graded", job.utterance, "none", None, f"grader error: {exc!r}", 0.0)]
            reason = "grader_error"
        if not verdicts:
            verdicts = [Verdict("supported", "", "none", None, "no checkable claim", 1.0)]
        await self._write(job, verdicts, reason)

    async def _write(self, job: GradingJob, verdicts: list[Verdict], reason: str) -> None:
        if not self._tables_ready:
            await self.audit.create_tables()
            self._tables_ready = True
        rows = [AuditRow(self.tenant, self.call_id, job.turn_id, job.utterance, job.caller_utterance, **v.to_dict(),
                         grader_model=self.grader.model, constraints_version=self.constraints_version,
                         severity=self.severity.severity(v.verdict, v.category)) for v in verdicts]
        await self.audit.write_many(rows)
        self.rows_written += len(rows)
        fields = ("verdict", "category", "severity", "constraint_ref", "rationale")
        for row in rows:
            if self.decisions is not None and (row.flagged or row.verdict == "not_graded"):
                detail = {"audit_row": row.id, "assistant_turn": row.turn_id, **{f: getattr(row, f) for f in fields}}
                action = "flagged" if row.flagged else "not_graded"
                self.decisions.record("grader", action, {**detail, "reason": reason})
            if self.alerter is not None and row.flagged and self.severity.should_alert(row.severity):
                await self.alerter.dispatch(alert_payload(row, console_url=self.console_url))


def _succeeded(frame: FunctionCallResultFrame) -> bool:
    """Whether a tool result reports the action done (not refused, failed, unknown or an error)."""
    return reports_done(frame.result, getattr(frame, "error", None))
