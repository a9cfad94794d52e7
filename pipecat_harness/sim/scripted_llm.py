"""A scripted LLM service that answers from a scenario's decisions."""

from __future__ import annotations

import asyncio
import copy
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pipecat.frames.frames import (
    Frame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallFromLLM, LLMService
from pipecat.services.settings import LLMSettings

from pipecat_harness._pipecat import push_llm_text
from pipecat_harness.fakes.speech import text_tokens
from pipecat_harness.sim.model_reading import (
    as_model_reads,
    caller_view,
    decision_matches,
    render_template,
)
from pipecat_harness.sim.model_script import DecisionCondition, ModelDecision, ModelScript

__all__ = ["ModelCall", "ScriptedChatModel", "ScriptedLLMService", "ScriptedModel", "render_template", "text_tokens"]


@dataclass
class ModelCall:
    """One call of the scripted model: what it received and what it decided.

    Parameters:
        messages: What the model received, as OpenAI-shaped messages.
        decision_index: The decision that fired (``None``: the fallback, or not decided yet).
        text: The text streamed so far.
        tool_calls: ``{"id", "name", "arguments"}`` of the calls it made.
        completed: Whether the reply was streamed to its end.
        planned_text: The whole reply text decided on.
    """

    messages: list[dict[str, Any]]
    decision_index: int | None
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    completed: bool = False
    planned_text: str = ""


def context_messages(context: LLMContext) -> list[dict[str, Any]]:
    """The context's OpenAI-shaped messages as plain dictionaries (provider-specific ones skipped)."""
    return [dict(m) for m in context.get_messages() if isinstance(m, Mapping)]


class ScriptedModel:
    """The decisions of a :class:`ModelScript`, applied to what a model received.

    Shared by :class:`ScriptedLLMService` (inside the pipeline) and the provider protocol fakes
    (:mod:`pipecat_harness.fakes`), which convert the provider-format request they received into OpenAI-shaped messages
    first.

    Args:
        script: The scenario's model script.
        seed: Sample the decisions' alternatives with this seed (``None``: always a decision's own action).
    """

    def __init__(self, script: ModelScript, *, seed: int | str | None = None) -> None:
        self.script = script
        self._random = random.Random(seed) if seed is not None else None
        decisions = list(script.decisions)
        if script.greeting:
            decisions.insert(0, ModelDecision(when=DecisionCondition(start=True), say=script.greeting))
        self._decisions = decisions
        self._fired = [0] * len(decisions)
        self._call_ids = itertools.count(1)
        self.calls: list[ModelCall] = []
        self.summary_requests: list[dict[str, Any]] = []

    def received(self, messages: Sequence[Mapping[str, Any]]) -> ModelCall:
        """Record a model call with what it received (the decision comes later, see :meth:`decide`)."""
        call = ModelCall(messages=copy.deepcopy([dict(m) for m in messages]), decision_index=None)
        self.calls.append(call)
        return call

    def decide(self, call: ModelCall) -> None:
        """Choose the decision for ``call`` and fill in its text and tool calls (ids included)."""
        index, variables = self._choose(call.messages)
        call.decision_index = index
        decision = self._decisions[index] if index is not None else None
        action = decision.actions()[0] if decision else None
        if decision is not None and decision.alternatives and self._random is not None:
            actions = decision.actions()
            action = self._random.choices(actions, weights=[a.weight for a in actions])[0]
        text = action.say if action else self.script.fallback
        if index is not None:
            self._fired[index] += 1
        call.planned_text = render_template(text, variables) if text else ""
        for spec in action.tool_calls if action else []:
            call.tool_calls.append({"id": f"call_{next(self._call_ids):04d}", "name": spec.name,
                                    "arguments": render_template(spec.args, variables)})

    def summarise(self, messages: Sequence[Mapping[str, Any]], *, system_instruction: str | None,
                  max_tokens: int | None) -> str | None:
        """Answer an out-of-band inference (Pipecat's context summarisation) with the script's summary."""
        self.summary_requests.append({"system_instruction": system_instruction, "max_tokens": max_tokens,
                                      "messages": [dict(m) for m in messages]})
        return self.script.summary

    def _choose(self, messages: Sequence[Mapping[str, Any]]) -> tuple[int | None, dict[str, str]]:
        messages = as_model_reads(messages)
        for index, decision in enumerate(self._decisions):
            if self._fired[index] >= decision.times:
                continue
            variables = decision_matches(decision.when, messages)
            if variables is not None:
                return index, variables
        return None, {}


class ScriptedChatModel(ScriptedModel):
    """The scripted model behind a provider fake (a :class:`~pipecat_harness.fakes.ChatModel`).

    It decides from the provider-format request the fake received, converted to OpenAI-shaped messages, after the
    script's first-token latency (a request abandoned while "thinking" consumes no decision).
    """

    def __init__(self, script: ModelScript, *, seed: int | str | None = None) -> None:
        super().__init__(script, seed=seed)
        self._replies: list[tuple[ModelCall, Any]] = []

    async def reply(self, request: Any) -> Any:
        """Answer a :class:`~pipecat_harness.fakes.ChatRequest` with a :class:`~pipecat_harness.fakes.ChatReply`."""
        from pipecat_harness.fakes.chat import ChatReply

        if not request.streaming:
            # Pipecat streams every model run of the conversation; only its out-of-band inference (run_inference:
            # context summarisation) asks for a whole response, as the scripted service answers it.
            summary = self.summarise(request.messages[1:] if request.system else request.messages,
                                     system_instruction=request.system or None, max_tokens=request.max_tokens)
            return ChatReply(text=summary or "")
        call = self.received(caller_view(request.messages))
        await asyncio.sleep(self.script.first_token_secs)
        self.decide(call)
        reply = ChatReply(text=call.planned_text, tool_calls=[dict(c) for c in call.tool_calls],
                          token_secs=self.script.token_secs)
        self._replies.append((call, reply))
        return reply

    def sync(self) -> list[ModelCall]:
        """Copy what the fake actually streamed into the calls; returns every call."""
        for call, reply in self._replies:
            call.text = reply.sent_text
            call.completed = reply.completed
        return self.calls


class ScriptedLLMService(LLMService):
    """An ``LLMService`` whose replies come from a :class:`ModelScript`.

    What the model "received" on each run is what an OpenAI-format provider would: the service's system instruction as a
    leading system message, then the context's messages.

    Args:
        script: The scenario's model script.
        system_instruction: The system prompt (as a bot sets it on its LLM service).
        seed: Sample the decisions' alternatives with this seed (``None``: always a decision's own action).
        **kwargs: Passed to ``LLMService`` (``run_in_parallel``, ``function_call_timeout_secs``...).
    """

    def __init__(self, script: ModelScript, *, system_instruction: str | None = None, seed: int | str | None = None,
                 **kwargs: Any) -> None:
        settings = LLMSettings(model="scripted", extra={}, system_instruction=system_instruction, temperature=None,
                               max_tokens=None, top_p=None, top_k=None, frequency_penalty=None, presence_penalty=None,
                               seed=None, filter_incomplete_user_turns=False, user_turn_completion_config=None,
                               use_provider_thinking_default=False)
        super().__init__(settings=settings, **kwargs)
        self._script = script
        self.model = ScriptedModel(script, seed=seed)

    @property
    def calls(self) -> list[ModelCall]:
        """Every model call, in order."""
        return self.model.calls

    @property
    def summary_requests(self) -> list[dict[str, Any]]:
        """Every out-of-band inference (context summarisation), in order."""
        return self.model.summary_requests

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Answer ``LLMContextFrame``s from the script; pass everything else on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self.push_frame(LLMFullResponseStartFrame())
            try:
                await self._respond(frame.context)
            finally:
                await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)

    async def run_inference(self, context: LLMContext, max_tokens: int | None = None,
                            system_instruction: str | None = None,
                            response_schema: dict[str, Any] | None = None) -> str | None:
        """Out-of-band inference (Pipecat's context summarisation): the script's summary."""
        return self.model.summarise(context_messages(context), system_instruction=system_instruction,
                                    max_tokens=max_tokens)

    async def _respond(self, context: LLMContext) -> None:
        messages = context_messages(context)
        instruction = cast(LLMSettings, self.settings).system_instruction
        if isinstance(instruction, str) and instruction:
            messages.insert(0, {"role": "system", "content": instruction})
        call = self.model.received(messages)
        await asyncio.sleep(self._script.first_token_secs)
        # Chosen only once the first token is due: a generation interrupted while "thinking" consumes nothing and issues
        # no tool call.
        self.model.decide(call)
        for token in text_tokens(call.planned_text):
            await push_llm_text(self, token)
            call.text += token
            if self._script.token_secs:
                await asyncio.sleep(self._script.token_secs)
        if call.tool_calls:
            await self.run_function_calls([
                FunctionCallFromLLM(function_name=spec["name"], tool_call_id=spec["id"], arguments=spec["arguments"],
                                    context=context)
                for spec in call.tool_calls
            ])
        call.completed = True
