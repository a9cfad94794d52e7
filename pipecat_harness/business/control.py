"""``CallStateControl``: the call's working state in a Pipecat pipeline.

* fills the state from the call: each submitted user turn (the turn boundary),
  each executed tool's result, each tool-gate decision on a write, how each
  reply was delivered (from the history control);
* shows the model a compact read-only rendering before every run (the LLM
  service's system instruction, replaced each time);
* installs the confirmation and identity rules into the tool gate for the
  tools ``call_state.confirm_tools`` / ``verified_tools`` name;
* puts every state change on the trace (``control`` lane, ``call_state``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipecat.frames.frames import Frame, LLMContextFrame, StartFrame
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams, LLMService

from pipecat_harness.business.confirmation import ConfirmationPolicy, Proposal
from pipecat_harness.business.context_budget import KeepItem, SummaryGuard, summarization_config
from pipecat_harness.business.permissions import identity_rule
from pipecat_harness.business.working_state import STATE_MESSAGE_MARK, WorkingStateKeeper, render_state
from pipecat_harness.control import HarnessControl, PipecatHandler, Placement, find_downstream
from pipecat_harness.decisions import ControlDecision
from pipecat_harness.instruction import InstructionEntry
from pipecat_harness.state.call_state import CallState, CallStateStore
from pipecat_harness.state.factory import create_store

if TYPE_CHECKING:
    from pipecat_harness.harness import Harness

__all__ = ["CallStateControl", "StateRenderer"]


class StateRenderer(FrameProcessor):
    """Shows the model the read-only state rendering before each model run.

    With an ``LLMService`` downstream the rendering is one of the service's
    appended system instructions, replaced before every run: a system message
    later in the context would reach Gemini, Anthropic and Bedrock as a *user*
    message, and the instruction also holds for the runs after tool results.
    Without one (a processor tested on its own) it is the last system message.
    """

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
            rendered = render_state(self._keeper.state)
            messages = [m for m in frame.context.get_messages() if not _is_state_message(m)]
            if self._instruction is None:
                messages.append({"role": "system", "content": rendered})
            else:
                self._instruction.set(rendered)
            frame.context.set_messages(messages)
        await self.push_frame(frame, direction)


def _is_state_message(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, str) and content.startswith(STATE_MESSAGE_MARK)


class CallStateControl(HarnessControl):
    """Working state, confirmation before writes and identity-bound writes for one call."""

    name = "call_state"

    def __init__(self, harness: Harness) -> None:
        super().__init__(harness)
        settings = harness.config.call_state
        store = None
        if settings.store == "redis":
            store = CallStateStore(create_store("redis", redis_url=settings.redis_url))
        self.keeper = WorkingStateKeeper(
            harness.call_id, store=store, identity_tools=frozenset(settings.identity_tools),
            on_change=self._on_state_change,
        )
        self.confirmation = (
            ConfirmationPolicy(settings.confirm_tools, on_change=self._on_proposal) if settings.confirm_tools else None
        )
        self.verified_tools = frozenset(settings.verified_tools)
        self._rules_installed = False
        self.summary_guard: SummaryGuard | None = None
        self.renderer = StateRenderer(self.keeper) if settings.render else None
        harness.decisions.add_listener(self._on_decision)

    def processors(self) -> list[tuple[Placement, FrameProcessor]]:
        """The state renderer, right before the model."""
        return [(Placement.BEFORE_LLM, self.renderer)] if self.renderer is not None else []

    def assistant_params(self, params: Any) -> Any:
        """Switch on Pipecat's context summarisation with the keep-what-matters prompt when a budget is set."""
        settings = self.harness.config.call_state
        if settings.context_budget_tokens is None:
            return params
        params.enable_auto_context_summarization = True
        params.auto_context_summarization_config = summarization_config(
            max_context_tokens=settings.context_budget_tokens,
            max_unsummarized_messages=settings.summarize_after_messages,
            keep_recent_messages=settings.keep_recent_messages,
        )
        return params

    def on_pipeline(self, processors: list[FrameProcessor]) -> None:
        """Check every summary the assistant aggregator applies."""
        if self.harness.config.call_state.context_budget_tokens is None:
            return
        aggregator = next((p for p in processors if isinstance(p, LLMAssistantAggregator)), None)
        if aggregator is None:
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
                                            turn_id=self.harness.decisions.turn_id)
                if properties is None:
                    await original(result)
                else:
                    await original(result, properties=properties)

            params.result_callback = capture  # type: ignore[assignment]
            await handler(params)

        recorded.__name__ = getattr(handler, "__name__", name)
        return recorded

    def _install_rules(self) -> None:
        if self._rules_installed:
            return
        gate_control = self.harness.control("tool_gate")
        if gate_control is None:
            return
        gate = getattr(gate_control, "gate", None)
        if gate is None:
            return
        if self.confirmation is not None:
            gate.policies.add(self.confirmation.rule())
        if self.verified_tools:
            gate.policies.add(identity_rule(lambda: self.keeper.identity_verified, self.verified_tools))
        self._rules_installed = True

    def _on_decision(self, kind: str, decision: ControlDecision) -> None:
        evidence = dict(decision.evidence or {})
        if decision.control == "tool_gate":
            self.keeper.gate_decision(decision.action, evidence, decision.outcome if kind != "decision" else None,
                                      decision.turn_id)
        elif decision.control == "history" and kind == "decision" and "generated_text" in evidence:
            self.keeper.assistant_delivery(
                generated=str(evidence.get("generated_text", "")),
                heard=str(evidence.get("retained_text", evidence.get("heard_text", ""))),
                full=decision.action == "played_in_full", turn_id=decision.turn_id,
            )

    def _on_proposal(self, proposal: Proposal) -> None:
        self.record(proposal.status, {"proposal": proposal.to_dict()})
        self.keeper.proposal(proposal)

    def _on_state_change(self, state: CallState, reason: str) -> None:
        recorder = self.harness.recorder
        if recorder is None:
            return
        snapshot = state.to_dict()
        snapshot.pop("history", None)  # the conversation is on the caller and bot lanes already
        recorder.add("control", "call_state", reason=reason, turn_id=self.harness.decisions.turn_id, state=snapshot)
