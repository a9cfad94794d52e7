"""One entry a control owns in an LLM service's system instruction.

Pipecat applies the base prompt and its appended instructions to every model run, which is where a control puts what
the model must read *as instruction* (a system message later in the context reaches Gemini, Anthropic and Bedrock as a
user turn). Pipecat only appends, while a control's text changes during the call, so the entry is replaced in place and
the instruction recomposed.
"""

from __future__ import annotations

from typing import Any

from pipecat.services.llm_service import LLMService

from pipecat_harness._pipecat import appended_system_instructions, recompose_system_instruction

__all__ = ["InstructionEntry", "is_marked", "show_marked"]


class _Entry(str):
    """A distinct object per entry, so an entry is found by identity even when two controls' texts are equal."""


class InstructionEntry:
    """The text one control keeps among the appended system instructions of the LLM service ``llm``."""

    def __init__(self, llm: LLMService[Any]) -> None:
        self.llm = llm
        self._entry: _Entry | None = None

    @property
    def text(self) -> str | None:
        """The entry's current text (``None``: not in the instruction)."""
        return str(self._entry) if self._entry is not None else None

    def set(self, text: str | None) -> None:
        """Put ``text`` in the instruction in place of this entry's earlier text (``None`` or empty removes it)."""
        entries = appended_system_instructions(self.llm)
        index = next((i for i, entry in enumerate(entries) if entry is self._entry), None)
        new = _Entry(text) if text else None
        if index is not None:
            entries[index : index + 1] = [new] if new is not None else []
        elif new is not None:
            entries.append(new)
        self._entry = new
        recompose_system_instruction(self.llm)


def is_marked(message: Any, mark: str) -> bool:
    """Whether a context message's text starts with ``mark``."""
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, str) and content.startswith(mark)


def show_marked(context: Any, entry: InstructionEntry | None, text: str | None, mark: str) -> None:
    """Give the model ``text`` as ``entry`` (else as the last system message); messages starting ``mark`` leave."""
    messages = context.get_messages()
    kept = [m for m in messages if not is_marked(m, mark)]
    if entry is not None:
        entry.set(text)
    elif text is not None:
        kept.append({"role": "system", "content": text})
    if len(kept) != len(messages) or (entry is None and text is not None):
        context.set_messages(kept)
