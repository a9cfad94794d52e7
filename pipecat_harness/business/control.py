"""``CallStateControl``: the call's working state in a Pipecat pipeline.

* fills the state from the call: each submitted user turn (the turn boundary), each executed tool's result, each
  tool-gate decision on a write, how each reply was delivered (from the history control);
* shows the model a compact read-only rendering before every run (the LLM service's system instruction, replaced each
  time);
* installs the confirmation rule into the tool gate for every write tool (``call_state.confirm_writes``, on by default;
  each exemption is logged and recorded), judged against what the caller heard of the read-back (the history control's
  played text, else the assistant's committed reply), with the proposals shared through Redis (``store: redis``) or
  the operation ledger's database (``tool_gate.ledger_url``) so another worker sees them;
* installs the verified-customer rule for ``call_state.verified_tools``: the customer a configured verification step
  established, and only records a trusted result showed that customer owns;
* renders what the model receives for every gated call from the operation record (``call_state.tool_results:
  operation``; see :mod:`pipecat_harness.business.tool_results`);
* with ``retrieval.pre_turn``, adds policy evidence for the caller's turn before the model runs
  (:class:`~pipecat_harness.retrieval.tool.PreTurnEvidence`), dropped when the state version moved during the search;
* puts every state change on the trace (``control`` lane, ``call_state``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.frames.frames import Frame, LLMContextFrame, StartFrame
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams, LLMService

from pipecat_harness.business.confirmation import ConfirmationPolicy, Proposal
from pipecat_harness.business.context_budget import KeepItem, SummaryGuard, summarization_config
from pipecat_harness.business.permissions import CustomerVerification
from pipecat_harness.business.tool_results import render_operation_result
from pipecat_harness.business.working_state import STATE_MESSAGE_MARK, WorkingStateKeeper, render_state
from pipecat_harness.control import HarnessControl, PipecatHandler, Placement, find_downstream
from pipecat_harness.errors import require_extra
from pipecat_harness.events import GateDecided, ReplyDelivered
from pipecat_harness.instruction import InstructionEntry, show_marked
from pipecat_harness.state.call_state import CallState, CallStateStore
from pipecat_harness.state.factory import create_store
from pipecat_harness.state.proposal_store import ProposalStore, StateStoreProposals
from pipecat_harness.state.store import StateStore
from pipecat_harness.stores import open_store
from pipecat_harness.tools.policy import PolicyRule, PolicyVerdict, ToolRequest
from pipecat_harness.tools.result import GateResult

if TYPE_CHECKING:
    from pipecat_harness.control import ControlHost
    from pipecat_harness.retrieval.evidence import Evidence, EvidenceSource
    from pipecat_harness.retrieval.scope import RetrievalScope
    from pipecat_harness.retrieval.tool import PreTurnEvidence
    from pipecat_harness.tools.control import ToolGateControl

__all__ = ["CallStateControl", "StateRenderer"]


class StateRenderer(FrameProcessor):
    """Shows the model the read-only state rendering before each model run.

    With an ``LLMService`` downstream the rendering is one of the service's appended system instructions, replaced
    before every run: a system message later in the context would reach Gemini, Anthropic and Bedrock as a *user*
    message, and the instruction also holds for the runs after tool results. Without one (a processor tested on its
    own) it is the last system message.
    """

    #: The only frame it acts on, besides the lifecycle frames (the start).
    handled_frames: tuple[type[Frame], ...] = (LLMContextFrame,)

    def __init__(self, keeper: WorkingStateKeeper, **kwargs: Any) -> None:
        kwargs.setdefault("enable_direct_mode", True)
        super().__init__(**kwargs)
        self._keeper = keeper
        self._instruction: InstructionEntry | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Refresh the state rendering on downstream context frames."""
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._instruction is None:
            llm = find_downstream(self, LLMService)
            self._instruction = InstructionEntry(llm) if llm is not None else None
        if isinstance(frame, LLMContextFrame) and direction == FrameDirection.DOWNSTREAM:
            show_marked(frame.context, self._instruction, render_state(self._keeper.state), STATE_MESSAGE_MARK)
        await self.push_frame(frame, direction)


def _proposal_store(harness: ControlHost, redis: StateStore | None) -> ProposalStore | None:
    """Redis with ``call_state.store: redis``, else the ledger's database when there is one, else none."""
    if redis is not None:
        return StateStoreProposals(redis)
    gate = harness.config.tool_gate
    if gate.ledger_url:
        proposals: ProposalStore = open_store("sql_proposals", "tool_gate.ledger_url", gate.ledger_url,
                                              table_prefix=gate.ledger_table_prefix)
        return proposals
    return None


class CallStateControl(HarnessControl):
    """Working state, confirmation before writes and identity-bound writes for one call."""

    name = "call_state"

    def __init__(self, harness: ControlHost) -> None:
        super().__init__(harness)
        settings = harness.config.call_state
        # One Redis client per call serves the state and the proposals.
        redis = create_store("redis", redis_url=settings.redis_url) if settings.store == "redis" else None
        store = CallStateStore(redis) if redis is not None else None
        steps: dict[str, list[str]] = {tool: [] for tool in settings.identity_tools}
        steps.update(settings.verification)
        self.verification = CustomerVerification(steps, customer_field=settings.customer_field,
                                                 owner_field=settings.owner_field)
        self.keeper = WorkingStateKeeper(harness.call_id, store=store, identity_tools=frozenset(steps),
                                         on_change=self._on_state_change, verification=self.verification)
        self.unconfirmed = frozenset(settings.unconfirmed_tools)
        self.confirmation = (
            ConfirmationPolicy(self._needs_confirmation, on_change=self._on_proposal,
                               store=_proposal_store(harness, redis), call_id=harness.call_id,
                               window_turns=settings.confirm_window_turns)
            if settings.confirm_writes or settings.confirm_tools else None)
        self.hidden_result_fields = frozenset(settings.internal_result_fields)
        self.verified_tools = frozenset(settings.verified_tools)
        self._saves: set[asyncio.Task[bool]] = set()
        self._rules_installed = False
        self._gate: ToolGateControl | None = None
        self.summary_guard: SummaryGuard | None = None
        self.renderer = StateRenderer(self.keeper) if settings.render else None
        self.evidence = self._pre_turn_evidence()
        harness.events.subscribe(GateDecided, self._on_gate)
        harness.events.subscribe(ReplyDelivered, self._on_reply)

    def _needs_confirmation(self, tool: str) -> bool:
        settings = self.harness.config.call_state
        return tool not in self.unconfirmed and (
            tool in settings.confirm_tools or (settings.confirm_writes and tool in self.harness.write_tools))

    def _log_opt_outs(self) -> None:
        settings = self.harness.config.call_state
        if not settings.confirm_writes:
            logger.warning(f"call {self.harness.call_id}: confirmation before writes is OFF (call_state."
                           "confirm_writes: false); write tools run without the caller's confirmation")
            self.record("confirmation_opt_out", {"tools": "all write tools", "setting": "confirm_writes"})
        exempt = sorted(self.unconfirmed)
        if exempt:
            logger.warning(f"call {self.harness.call_id}: write tools exempt from confirmation "
                           f"(call_state.unconfirmed_tools): {', '.join(exempt)}")
            self.record("confirmation_opt_out", {"tools": exempt, "setting": "unconfirmed_tools"})

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """Pre-turn evidence and the state renderer, right before the model."""
        return [(Placement.BEFORE_LLM, p) for p in (self.evidence, self.renderer) if p is not None]

    # -- pre-turn evidence ---------------------------------------------------------------------------

    def use_retriever(self, retriever: EvidenceSource, scope: Callable[[], RetrievalScope] | None = None) -> None:
        """Search ``retriever`` (within ``scope``) for pre-turn evidence instead of the configured documents.

        Call it before the pipeline is built; ``retrieval.pre_turn`` must be on.
        """
        if self.evidence is None:
            raise ValueError("pre-turn evidence is off: set retrieval.pre_turn: true in the harness config")
        self.evidence.use(retriever, scope)

    def _pre_turn_evidence(self) -> PreTurnEvidence | None:
        settings = self.harness.config.retrieval
        if not settings.pre_turn:
            return None
        require_extra("retrieval.pre_turn", "sqlalchemy", "sqlite")  # the evidence index is a SQL full-text index
        from pipecat_harness.retrieval.tool import PreTurnEvidence

        return PreTurnEvidence(None, self.retrieval_scope, lambda: self.keeper.version,
                               budget_secs=settings.budget_ms / 1000.0, on_result=self._on_evidence,
                               limit=settings.limit, build=self._build_retriever)

    def retrieval_scope(self) -> RetrievalScope:
        """The call's scope from trusted context: the gate's server context, else the configured tenant."""
        from pipecat_harness.retrieval.scope import RetrievalScope

        settings = self.harness.config.retrieval
        context = dict(self._gate.gate.server_context if self._gate is not None else {})
        context.setdefault("tenant_id", settings.tenant or self.harness.config.tool_gate.tenant)
        context.setdefault("products", settings.products)
        context["identity_verified"] = self.keeper.identity_verified
        return RetrievalScope.from_server_context(context, call_date=settings.call_date or dt.date.today())

    async def _build_retriever(self) -> EvidenceSource:
        """The call's retriever (started with the pipeline; the file's embeddings are shared by the process)."""
        from pipecat_harness.retrieval.documents import BUNDLED_POLICIES

        settings = self.harness.config.retrieval
        retriever: EvidenceSource = await open_store(
            "file_retriever", "retrieval.pre_turn", settings.documents or BUNDLED_POLICIES, url=settings.index_url,
            embeddings=settings.embeddings, limit=settings.limit)
        return retriever

    def end_call(self) -> None:
        """The call ended (``Harness.close``): stop building the retriever and close it."""
        if self.evidence is not None:
            self.evidence.end_call()

    def _on_evidence(self, evidence: Evidence | None, reason: str) -> None:
        cited = [item.source for item in evidence.items] if evidence is not None else []
        self.record("pre_turn_evidence", {"reason": reason, "sources": cited,
                                          "status": evidence.status if evidence is not None else None,
                                          "search_ms": round(evidence.timings.search_ms, 2) if evidence else None})

    def assistant_params(self, params: Any) -> Any:
        """Switch on Pipecat's context summarisation with the keep-what-matters prompt when a budget is set."""
        settings = self.harness.config.call_state
        if settings.context_budget_tokens is None:
            return params
        params.enable_auto_context_summarization = True
        params.auto_context_summarization_config = summarization_config(
            max_context_tokens=settings.context_budget_tokens, keep_recent_messages=settings.keep_recent_messages,
            max_unsummarized_messages=settings.summarize_after_messages)
        return params

    def on_pipeline(self, processors: list[FrameProcessor]) -> None:
        """Check every summary the assistant aggregator applies; note committed replies when history is off."""
        aggregator = next((p for p in processors if isinstance(p, LLMAssistantAggregator)), None)
        if aggregator is None:
            return
        if self.confirmation is not None and not self.harness.config.history.enabled:
            aggregator.add_event_handler("on_assistant_turn_stopped", self._on_assistant_turn)
        if self.harness.config.call_state.context_budget_tokens is None:
            return
        self.summary_guard = SummaryGuard(aggregator.context, lambda: self.keeper.state,
                                          on_checked=self._on_summary_checked)
        aggregator.add_event_handler("on_summary_applied", self.summary_guard.on_summary_applied)

    def _on_summary_checked(self, kept: list[KeepItem], restored: list[KeepItem]) -> None:
        self.record("summary_checked", {"kept": [i.text for i in kept], "restored": [i.text for i in restored]})

    def on_user_turn(self, turn_id: int, text: str) -> None:
        """The turn boundary: log the caller's words, advance the version."""
        if self.confirmation is not None:
            self.confirmation.caller_turn(turn_id, text)
        self.keeper.caller_turn(turn_id, text)

    def wrap_function(self, name: str, handler: PipecatHandler, *, write: bool) -> PipecatHandler:
        """Record what the tool returned when it ran (this wrapper sits inside the gate's)."""
        self._install_rules()

        async def recorded(params: FunctionCallParams) -> None:
            original = params.result_callback

            async def capture(result: Any, *, properties: Any = None) -> None:
                if properties is None or getattr(properties, "is_final", True):
                    self.keeper.tool_result(name, params.tool_call_id, result, write=write,
                                            turn_id=self.harness.decisions.turn_id,
                                            arguments=dict(params.arguments or {}))
                await original(result, **({} if properties is None else {"properties": properties}))

            params.result_callback = capture  # type: ignore[assignment]
            await handler(params)

        recorded.__name__ = getattr(handler, "__name__", name)
        return recorded

    def bind_gate(self, gate: HarnessControl) -> None:
        """Check writes against confirmation and identity through ``gate``, and render its results."""
        from pipecat_harness.tools.control import ToolGateControl

        if isinstance(gate, ToolGateControl):
            self._gate = gate

    def _install_rules(self) -> None:
        if self._rules_installed or self._gate is None:
            return
        gate_control, gate = self._gate, self._gate.gate
        if self.confirmation is not None or self.verified_tools:
            # One rule: a write the verified customer may not make is refused before any confirmation is
            # judged, so a proposal is never marked confirmed for a write that then does not run.
            gate.policies.add(PolicyRule("confirmation", self._check_write))
        self._log_opt_outs()
        if self.harness.config.call_state.tool_results == "operation" or self.confirmation is not None:
            gate_control.hook = self
        self._rules_installed = True

    def _check_write(self, request: ToolRequest) -> PolicyVerdict | None:
        verdict = self.verification.check(request) if request.name in self.verified_tools else None
        return self.confirmation.check(request) if verdict is None and self.confirmation is not None else verdict

    # -- the tool gate's hook ------------------------------------------------------------------------

    async def before_call(self, name: str) -> None:
        """Take proposals another worker stored before the gate judges a confirmation-bound call."""
        if self.confirmation is not None and self.confirmation.binds(name):
            await self.confirmation.sync()

    async def render(self, result: GateResult) -> Any:
        """Store proposal changes, then give the model the operation record's rendering."""
        if self.confirmation is not None and self.confirmation.binds(result.name):
            await self.confirmation.save()
        if self.harness.config.call_state.tool_results != "operation":
            return result.to_tool_result()
        confirmation = self.confirmation if result.reason_kind == "clarify" else None
        pending = confirmation.pending() if confirmation is not None else []
        proposal = next((p.proposal_id for p in pending if p.tool == result.name), None)
        return render_operation_result(result, hidden_fields=self.hidden_result_fields, proposal_id=proposal,
                                       operation_id=self.keeper.operation_id)

    def _on_gate(self, event: GateDecided) -> None:
        decision = event.decision
        self.keeper.gate_decision(decision.action, dict(decision.evidence or {}),
                                  decision.outcome if event.outcome else None, decision.turn_id)

    def _on_reply(self, event: ReplyDelivered) -> None:
        self.keeper.assistant_delivery(generated=event.generated, heard=event.retained, full=event.full,
                                       turn_id=event.turn_id)
        self._heard(event.turn_id, event.heard)

    def _on_assistant_turn(self, _aggregator: Any, message: Any) -> None:
        """Without the history control (only then is it subscribed), the committed reply is what the caller heard."""
        self._heard(self.harness.decisions.turn_id, str(getattr(message, "content", "")))

    def _heard(self, turn_id: int, text: str) -> None:
        """A reply the caller heard: the read-back a confirmation is judged against (shared with other workers)."""
        confirmation = self.confirmation
        if confirmation is None:
            return
        confirmation.assistant_heard(turn_id, text)
        if confirmation.store is not None and confirmation.pending():
            try:
                task = asyncio.get_running_loop().create_task(confirmation.save())
            except RuntimeError:  # no loop (a decision recorded outside the call): saved with the next request
                return
            self._saves.add(task)
            task.add_done_callback(self._saves.discard)

    def _on_proposal(self, proposal: Proposal) -> None:
        self.record(proposal.status, {"proposal": proposal.to_dict()})
        self.keeper.proposal(proposal)

    def _on_state_change(self, state: CallState, reason: str) -> None:
        recorder = self.harness.recorder
        if recorder is None:
            return
        # A new structure the trace can encode off the loop after the state moved on, without the
        # conversation (it is on the caller and bot lanes already).
        recorder.add("control", "call_state", reason=reason, turn_id=self.harness.decisions.turn_id,
                     state=state.to_dict(exclude={"history"}))
