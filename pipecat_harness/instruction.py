"""One entry a control owns in an LLM service's system instruction.

Pipecat composes the instruction an LLM service sends from the user's base
prompt and its appended instructions (``LLMService.append_system_instruction``)
and applies it to every model run, including the runs that follow tool
results. That is where a control puts what the model must read *as
instruction*: a system or developer message later in the context reaches
Gemini, Anthropic and Bedrock as a user turn, as if the caller had said it.

Pipecat offers only appending, while a control's text changes during the call
(the call state every turn, notices as operations settle), so the entry is
replaced in place and the instruction recomposed.
"""

from __future__ import annotations

from typing import Any

from pipecat.services.llm_service import LLMService

from pipecat_harness._pipecat import appended_system_instructions, recompose_system_instruction

__all__ = ["InstructionEntry", "is_marked", "show_marked"]


class _Entry(str):
    """A distinct object per entry, so an entry is found by identity even when two controls' texts are equal."""


class InstructionEntry:
    """The text one control keeps among an LLM service's appended system instructions.

    Args:
        llm: The LLM service whose system instruction carries the entry.
    """

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
            if new is None:
                del entries[index]
            else:
                entries[index] = new
        elif new is not None:
            entries.append(new)
        self._entry = new
        recompose_system_instruction(self.llm)


def is_marked(message: Any, mark: str) -> bool:
    """Whether a context message's text starts with ``mark``."""
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, str) and content.startswith(mark)


def show_marked(context: Any, entry: InstructionEntry | None, text: str | None, mark: str) -> None:
    """Give the model ``text`` as ``entry``, or with no LLM service as the context's last system message.

    Context messages starting with ``mark`` (an earlier text) leave the context either way.
    """
    messages = context.get_messages()
    kept = [m for m in messages if not is_marked(m, mark)]
    if entry is not None:
        entry.set(text)
    elif text is not None:
        kept.append({"role": "system", "content": text})
    if len(kept) != len(messages) or (entry is None and text is not None):
        context.set_messages(kept)
