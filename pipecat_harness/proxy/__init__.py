"""Custom-LLM proxy: become the model endpoint for Vapi and Retell and build the prompt ourselves."""

from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.auth import ProxyAuth
from pipecat_harness.proxy.gemini_upstream import GeminiUpstream
from pipecat_harness.proxy.limits import ProxyLimits
from pipecat_harness.proxy.openai_upstream import OpenAICompatibleUpstream
from pipecat_harness.proxy.policy import ModelPolicy
from pipecat_harness.proxy.requests import RequestError, parse_chat_request, parse_conversation_update
from pipecat_harness.proxy.retell import RetellSession
from pipecat_harness.proxy.scripted import ScriptedReply, ScriptedUpstream
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.proxy.upstream import (
    SystemPrompt,
    ToolCallDelta,
    Upstream,
    UpstreamChunk,
    UpstreamError,
    UpstreamRequest,
)

__all__ = ["GeminiUpstream", "ModelPolicy", "OpenAICompatibleUpstream", "ProxyAuth", "ProxyLimits", "ProxyService",
           "RequestError", "RetellSession", "ScriptedReply", "ScriptedUpstream", "SystemPrompt", "ToolCallDelta",
           "Upstream", "UpstreamChunk", "UpstreamError", "UpstreamRequest", "create_app", "parse_chat_request",
           "parse_conversation_update"]
