"""``ModelPolicy``: what the operator decides about every upstream request.

The operator pays for the model and answers for it: what a platform posts is conversation data, its system
messages and non-text content parts (a URL an upstream would fetch, media it would bill) pass only opted in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NON_TEXT_PART_TYPES", "ModelPolicy"]

#: The OpenAI content-part types besides ``text`` an operator can let through.
NON_TEXT_PART_TYPES = frozenset({"image_url", "file_url", "file", "video_url", "input_audio"})


@dataclass(frozen=True)
class ModelPolicy:
    """The operator's model settings.

    Parameters:
        model: Model name sent upstream ("" leaves it to the upstream's own setting).
        max_tokens: Output limit of every model call.
        temperature: Sampling temperature of every model call.
        tools: OpenAI function tools offered to the model.
        tool_choice: OpenAI ``tool_choice`` sent with the tools.
        base_prompt: Operator prompt placed first in the stable system block.
        trust_platform_prompt: Keep an authenticated platform's system messages in the base block.
        content_parts: Content-part types besides ``text`` sent upstream (default none).
    """

    model: str = ""
    max_tokens: int = 400
    temperature: float = 0.0
    tools: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    tool_choice: Any = None
    base_prompt: str = ""
    trust_platform_prompt: bool = False
    content_parts: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.max_tokens <= 0:
            raise ValueError("proxy max_tokens must be a positive integer")
        object.__setattr__(self, "tools", tuple(dict(t) for t in self.tools))
        object.__setattr__(self, "content_parts", frozenset(self.content_parts))

    def content(self, content: Any) -> tuple[Any, list[str]]:
        """``content`` as sent upstream, and the types of the parts left out (a text-only list becomes one string)."""
        if not isinstance(content, list):
            return content, []
        kept: list[Any] = []
        dropped: list[str] = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text" or (kind in self.content_parts and kind is not None):
                kept.append(part)
            else:
                dropped.append(str(kind)[:40])
        if all(part.get("type") == "text" for part in kept):
            return "\n".join(str(part.get("text", "")) for part in kept), dropped
        return kept, dropped

    def tool_list(self) -> list[dict[str, Any]]:
        """Copies of the configured tools (a request may not mutate the policy)."""
        return [dict(t) for t in self.tools]

    @classmethod
    def from_settings(cls, settings: Any, *, tools: Sequence[Mapping[str, Any]] = ()) -> ModelPolicy:
        """Build from a :class:`~pipecat_harness.config.ProxySettings` block."""
        return cls(model=settings.model, max_tokens=settings.max_tokens, temperature=settings.temperature,
                   tools=tuple(tools or settings.tools), tool_choice=settings.tool_choice,
                   base_prompt=settings.base_prompt, trust_platform_prompt=settings.trust_platform_prompt,
                   content_parts=frozenset(getattr(settings, "content_parts", ())))
