"""Provider protocol fakes on loopback: Pipecat's own service classes run against them, offline."""

from pipecat_harness.fakes.background import serve_in_background
from pipecat_harness.fakes.chat import ChatModel, ChatReply, ChatRequest, ReplyList, as_chat_model
from pipecat_harness.fakes.deepgram import DeepgramFake
from pipecat_harness.fakes.elevenlabs import ElevenLabsFake, SynthesizedWord
from pipecat_harness.fakes.gemini import GeminiFake, gemini_to_chat_messages
from pipecat_harness.fakes.openai_chat import OpenAIChatFake, openai_to_chat_messages
from pipecat_harness.fakes.server import Exchange, LoopbackServer

__all__ = ["ChatModel", "ChatReply", "ChatRequest", "DeepgramFake", "ElevenLabsFake", "Exchange", "GeminiFake",
           "LoopbackServer", "OpenAIChatFake", "ReplyList", "SynthesizedWord", "as_chat_model",
           "gemini_to_chat_messages", "openai_to_chat_messages", "serve_in_background"]
