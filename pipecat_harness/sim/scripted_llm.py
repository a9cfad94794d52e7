"""A scripted LLM service that answers from a scenario's decisions."""

from __future__ import annotations

import asyncio
import copy
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pipecat.frames.frames import Frame, LLMContextFrame, LLMFullResponseEndFrame, LLMFullResponseStartFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallFromLLM, LLMService
from pipecat.services.settings import LLMSettings

from pipecat_harness._pipecat import push_llm_text
from pipecat_harness.fakes.speech import text_tokens
from pipecat_harness.sim.model_reading import as_model_reads, caller_view, decision_matches, render_template
from pipecat_harness.sim.model_script import DecisionCondition, ModelDecision, ModelScript

__all__ = ["ModelCall", "ScriptedChatModel", "ScriptedLLMService", "ScriptedModel", "render_template", "text_tokens"]

#: Sampling settings a script does not use: stored as ``None``, as a service does a setting it does not support.
_UNUSED_SETTINGS = ("temperature", "max_tokens", "top_p", "top_k", "frequency_penalty", "presence_penalty", "seed")


@dataclass
class ModelCall:
    """One call of the scripted model: the OpenAI-shaped messages it received and what it decided.

    ``decision_index`` is ``None`` for the fallback (or before deciding); ``text`` is what was streamed of
    ``planned_text``; ``tool_calls`` hold ``{"id", "name", "arguments"}``.
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

    Shared by :class:`ScriptedLLMService` and the provider protocol fakes (:mod:`pipecat_harness.fakes`), which first
    convert the request they received into OpenAI-shaped messages. With a ``seed``, a decision's alternatives are
    sampled; without one, a decision's own action is always taken.
    """

    def __init__(self, script: ModelScript, *, seed: int | str | None = None) -> None:
        self.script = script
        self._random = random.Random(seed) if seed is not None else None
        greeting = [ModelDecision(when=DecisionCondition(start=True), say=script.greeting)] if script.greeting else []
        self._decisions = [*greeting, *script.decisions]
        self._fired = [0] * len(self._decisions)
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
        if index is None:
            call.planned_text = render_template(self.script.fallback, variables)
            return
        self._fired[index] += 1
        actions = self._decisions[index].actions()
        action = actions[0]
        if len(actions) > 1 and self._random is not None:
            action = self._random.choices(actions, weights=[a.weight for a in actions])[0]
        call.planned_text = render_template(action.say, variables) if action.say else ""
        call.tool_calls += [{"id": f"call_{next(self._call_ids):04d}", "name": spec.name,
                             "arguments": render_template(spec.args, variables)} for spec in action.tool_calls]

    def summarise(self, messages: Sequence[Mapping[str, Any]], *, system_instruction: str | None,
                  max_tokens: int | None) -> str | None:
        """Answer an out-of-band inference (Pipecat's context summarisation) with the script's summary."""
        request = {"system_instruction": system_instruction, "max_tokens": max_tokens}
        self.summary_requests.append({**request, "messages": [dict(m) for m in messages]})
        return self.script.summary

    def _choose(self, messages: Sequence[Mapping[str, Any]]) -> tuple[int | None, dict[str, str]]:
        messages = as_model_reads(messages)
        for index, decision in enumerate(self._decisions):
            if self._fired[index] < decision.times:
                variables = decision_matches(decision.when, messages)
                if variables is not None:
                    return index, variables
        return None, {}


class ScriptedChatModel(ScriptedModel):
    """The scripted model behind a provider fake (a :class:`~pipecat_harness.fakes.ChatModel`).

    It decides from the request the fake received, after the script's first-token latency (a request abandoned while
    "thinking" consumes no decision).
    """

    def __init__(self, script: ModelScript, *, seed: int | str | None = None) -> None:
        super().__init__(script, seed=seed)
        self._replies: list[tuple[ModelCall, Any]] = []

    async def reply(self, request: Any) -> Any:
        """Answer a :class:`~pipecat_harness.fakes.ChatRequest` with a :class:`~pipecat_harness.fakes.ChatReply`."""
        from pipecat_harness.fakes.chat import ChatReply

        if not request.streaming:
            # Pipecat streams every model run of the conversation; only its out-of-band inference (context
            # summarisation) asks for a whole response.
            messages = request.messages[1:] if request.system else request.messages
            summary = self.summarise(messages, system_instruction=request.system or None, max_tokens=request.max_tokens)
            return ChatReply(text=summary or "")
        call = self.received(caller_view(request.messages))
        await asyncio.sleep(self.script.first_token_secs)
        self.decide(call)
        tool_calls = [dict(c) for c in call.tool_calls]
        reply = ChatReply(text=call.planned_text, tool_calls=tool_calls, token_secs=self.script.token_secs)
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
    leading system message, then the context's messages. ``seed`` samples the decisions' alternatives (see
    :class:`ScriptedModel`); ``kwargs`` go to ``LLMService`` (``run_in_parallel``, ``function_call_timeout_secs``...).
    """

    def __init__(self, script: ModelScript, *, system_instruction: str | None = None, seed: int | str | None = None,
                 **kwargs: Any) -> None:
        settings = LLMSettings(model="scripted", extra={}, system_instruction=system_instruction,
                               filter_incomplete_user_turns=False, user_turn_completion_config=None,
                               use_provider_thinking_default=False, **dict.fromkeys(_UNUSED_SETTINGS))
        super().__init__(settings=settings, **kwargs)
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
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        await self.push_frame(LLMFullResponseStartFrame())
        try:
            await self._respond(frame.context)
        finally:
            await self.push_frame(LLMFullResponseEndFrame())

    async def run_inference(self, context: LLMContext, max_tokens: int | None = None,
                            system_instruction: str | None = None,
                            response_schema: dict[str, Any] | None = None) -> str | None:
        """Out-of-band inference (Pipecat's context summarisation): the script's summary."""
        messages = context_messages(context)
        return self.model.summarise(messages, system_instruction=system_instruction, max_tokens=max_tokens)

    async def _respond(self, context: LLMContext) -> None:
        messages = context_messages(context)
        instruction = cast(LLMSettings, self.settings).system_instruction
        if isinstance(instruction, str) and instruction:
            messages.insert(0, {"role": "system", "content": instruction})
        call, script = self.model.received(messages), self.model.script
        await asyncio.sleep(script.first_token_secs)
        # Chosen only once the first token is due: a generation interrupted while "thinking" consumes nothing and issues
        # no tool call.
        self.model.decide(call)
        for token in text_tokens(call.planned_text):
            await push_llm_text(self, token)
            call.text += token
            if script.token_secs:
                await asyncio.sleep(script.token_secs)
        if call.tool_calls:
            await self.run_function_calls([FunctionCallFromLLM(function_name=c["name"], tool_call_id=c["id"],
                                                               arguments=c["arguments"], context=context)
                                           for c in call.tool_calls])
        call.completed = True
