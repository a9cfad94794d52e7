"""Context budget: Pipecat's context summarisation, told what it must keep, and checked afterwards.

A summary can keep "discussed renewal" and lose "I do not want this renewed". :func:`summarization_config` gives
Pipecat's auto-summarisation a prompt asking for constraints, corrections and refusals (in the caller's words), open
questions and operation ids; :class:`SummaryGuard` appends, verbatim, what the call state says must survive and the
summary dropped. The call state's log and the trace keep every turn as it happened.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.utils.context.llm_context_summarization import (
    LLMAutoContextSummarizationConfig,
    LLMContextSummarizationUtil,
    LLMContextSummaryConfig,
)

from pipecat_harness.business.working_state import STATE_MESSAGE_MARK
from pipecat_harness.state.call_state import CallState

__all__ = ["KEPT_HEADER", "SUMMARY_PROMPT", "KeepItem", "SummaryGuard", "estimate_tokens", "must_keep",
           "summarization_config"]

SUMMARY_PROMPT = """You are compressing the older part of a customer-service phone call so the agent can continue it.
Write short factual lines under these headings, and never drop an item that fits one of them:
CONSTRAINTS: limits the caller set (dates, amounts, "only", "must", "not before").
CORRECTIONS AND REFUSALS: every time the caller corrected something or said no; quote the caller's own words
(for example: caller said "I do not want this renewed"). A refusal must never become a neutral topic.
UNRESOLVED QUESTIONS: what is still open or waiting for the caller's answer or confirmation.
OPERATIONS: every operation id with its tool and status exactly as written (for example op-2 issue_refund succeeded).
OTHER FACTS: anything else needed to continue.
Omit greetings and small talk. Output only the summary."""

#: Heading of the lines :class:`SummaryGuard` adds when a summary dropped them.
KEPT_HEADER = "Kept verbatim from the call record (the summary had dropped these):"
_SUMMARY_LEAD = "Summary of the earlier call"

_REFUSAL = re.compile(r"\b(i do not want|i don't want|i do not|i don't|don't|do not|no longer|not interested|cancel|"
                      r"stop|never|refuse|no,|not (?:the|that|this)|instead|make it|rather|actually|"
                      r"sorry,? (?:i meant|make))\b", re.IGNORECASE)
_CONSTRAINT = re.compile(r"\b(only|must|need(?:s)? to|has to|have to|no later than|not before|not after|"
                         r"by (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow)|at most|at least|"
                         r"under|below|maximum|minimum)\b", re.IGNORECASE)


@dataclass(frozen=True)
class KeepItem:
    """Something a summary must not lose.

    Parameters:
        kind: ``correction``, ``constraint``, ``pending`` or ``operation``.
        text: The line to keep (caller's words quoted; ids as written).
        needle: What must appear in the context for the item to count as kept.
    """

    kind: str
    text: str
    needle: str


def must_keep(state: CallState) -> list[KeepItem]:
    """What the call state says must survive summarisation."""
    items: list[KeepItem] = []
    for message in state.history:
        if message.get("role") != "user":
            continue
        text = str(message.get("content", "")).strip()
        turn = message.get("turn_id")
        if _REFUSAL.search(text):
            items.append(KeepItem("correction", f'caller (turn {turn}) said: "{text}"', text))
        elif _CONSTRAINT.search(text):
            items.append(KeepItem("constraint", f'caller (turn {turn}) set: "{text}"', text))
    items += [KeepItem("pending", f"open: {name} = {f.value}", str(f.value)) for name, f in state.pending.items()]
    return items + [KeepItem("operation", f"{op} {record.get('tool')} {record.get('status')}", op)
                    for op, record in state.operations.items()]


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def estimate_tokens(messages: list[Any]) -> int:
    """Pipecat's own estimate (4 characters a token plus a per-message overhead)."""
    return int(LLMContextSummarizationUtil.estimate_context_tokens(LLMContext(messages=list(messages))))


def summarization_config(*, max_context_tokens: int, max_unsummarized_messages: int | None = 20,
                         keep_recent_messages: int = 4) -> LLMAutoContextSummarizationConfig:
    """Pipecat's auto-summarisation settings with the keep-what-matters prompt.

    It summarises past ``max_context_tokens`` (Pipecat's estimate) or after ``max_unsummarized_messages`` new
    messages, and always keeps the ``keep_recent_messages`` most recent messages uncompressed.
    """
    summary = LLMContextSummaryConfig(
        target_context_tokens=max(100, max_context_tokens // 3), min_messages_after_summary=keep_recent_messages,
        summarization_prompt=SUMMARY_PROMPT,
        summary_message_template=f"{_SUMMARY_LEAD} (older messages were compressed):\n{{summary}}")
    return LLMAutoContextSummarizationConfig(max_context_tokens=max_context_tokens, summary_config=summary,
                                             max_unsummarized_messages=max_unsummarized_messages)


class SummaryGuard:
    """Checks each applied summary and restores what it dropped (:meth:`on_summary_applied` handles Pipecat's event).

    Args:
        context: The call's LLM context.
        state: Returns the call state.
        on_checked: Called with ``(kept, restored)`` item lists (for the trace).
    """

    def __init__(self, context: LLMContext, state: Callable[[], CallState], *,
                 on_checked: Callable[[list[KeepItem], list[KeepItem]], None] | None = None) -> None:
        self.context = context
        self.state = state
        self.on_checked = on_checked
        self.summaries = 0

    async def on_summary_applied(self, *_args: Any) -> None:
        """Pipecat event handler: check the new summary message and repair it in place."""
        self.check()

    def check(self) -> list[KeepItem]:
        """Restore dropped items into the summary message; returns the restored items."""
        messages = self.context.get_messages()
        contents = [str(m.get("content", "")) if isinstance(m, dict) else None for m in messages]
        index = next((i for i, c in enumerate(contents) if c is not None and c.startswith(_SUMMARY_LEAD)), None)
        if index is None:
            return []
        self.summaries += 1
        # The state rendering is refreshed every run; what must survive has to be in the dialogue itself.
        present = " ".join(_normal(c) for c in contents if c is not None and not c.startswith(STATE_MESSAGE_MARK))
        items = must_keep(self.state())
        missing = [item for item in items if _normal(item.needle) not in present]
        kept = [item for item in items if item not in missing]
        if missing:
            summary: Any = messages[index]
            # Edited in place: Pipecat tracks its summary message by identity.
            summary["content"] = f"{summary['content']}\n{KEPT_HEADER}\n" + "\n".join(f"- {i.text}" for i in missing)
        if self.on_checked is not None:
            self.on_checked(kept, missing)
        return missing
