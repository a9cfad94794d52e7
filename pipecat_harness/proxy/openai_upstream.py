"""Upstream: any OpenAI-compatible chat-completions endpoint (official ``openai`` client)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pipecat_harness.proxy.upstream import ToolCallDelta, Upstream, UpstreamChunk, UpstreamError, UpstreamRequest

__all__ = ["OpenAICompatibleUpstream", "render_openai_messages"]


def render_openai_messages(request: UpstreamRequest, *, mark_cacheable: bool = True) -> list[dict[str, Any]]:
    """The request as OpenAI messages: one system message with two text blocks first.

    The base block carries ``cache_control`` (honoured by gateways that cache
    prompt prefixes, ignored by most others) unless ``mark_cacheable`` is off.
    """
    blocks: list[dict[str, Any]] = []
    if request.system.base:
        base: dict[str, Any] = {"type": "text", "text": request.system.base}
        if mark_cacheable:
            base["cache_control"] = {"type": "ephemeral"}
        blocks.append(base)
    if request.system.directive:
        blocks.append({"type": "text", "text": request.system.directive})
    system = [{"role": "system", "content": blocks}] if blocks else []
    return system + list(request.messages)


class OpenAICompatibleUpstream(Upstream):
    """Streams from an OpenAI-compatible endpoint.

    Args:
        base_url: Endpoint base URL (e.g. ``http://127.0.0.1:8001/v1``).
        api_key: Key sent as a bearer token.
        model: Model name; overrides the one the platform asked for when set.
        mark_cacheable: Mark the base system block cacheable.
        timeout_secs: HTTP timeout.
        extra_body: Extra JSON fields sent with every request (gateway-specific options).
        client: An existing ``openai.AsyncOpenAI`` client (overrides the above).
    """

    name = "openai"

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str = "not-needed",
        model: str = "",
        mark_cacheable: bool = True,
        timeout_secs: float = 30.0,
        extra_body: dict[str, Any] | None = None,
        client: Any = None,
    ) -> None:
        if client is None:
            import openai

            client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout_secs, max_retries=0)
        self.client = client
        self.model = model
        self.mark_cacheable = mark_cacheable
        self.extra_body = dict(extra_body or {})

    async def stream(self, request: UpstreamRequest) -> AsyncIterator[UpstreamChunk]:
        """Stream the completion, mapping chunks one to one."""
        kwargs: dict[str, Any] = {
            "model": self.model or request.model,
            "messages": render_openai_messages(request, mark_cacheable=self.mark_cacheable),
            "temperature": request.temperature,
            "stream": True,
        }
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        if request.max_tokens:
            kwargs["max_tokens"] = request.max_tokens
        if request.tools:
            kwargs["tools"] = request.tools
            if request.tool_choice is not None:
                kwargs["tool_choice"] = request.tool_choice
        try:
            stream = await self.client.chat.completions.create(**kwargs)
            async for chunk in stream:
                for choice in chunk.choices or []:
                    delta = choice.delta
                    calls = tuple(
                        ToolCallDelta(
                            index=call.index,
                            id=call.id,
                            name=call.function.name if call.function else None,
                            arguments=(call.function.arguments or "") if call.function else "",
                        )
                        for call in (delta.tool_calls or [])
                    )
                    if delta.content or calls or choice.finish_reason:
                        yield UpstreamChunk(
                            text=delta.content or "", tool_calls=calls, finish_reason=choice.finish_reason
                        )
        except UpstreamError:
            raise
        except Exception as exc:
            raise UpstreamError(f"OpenAI-compatible upstream failed: {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.close()
