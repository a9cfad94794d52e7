"""The bots' provider services in a simulated call, against the protocol fakes on loopback."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService

from pipecat_harness.fakes.deepgram import DeepgramFake
from pipecat_harness.fakes.elevenlabs import ElevenLabsFake, SynthesizedWord
from pipecat_harness.fakes.gemini import GeminiFake
from pipecat_harness.fakes.openai_chat import OpenAIChatFake
from pipecat_harness.fakes.server import Exchange, LoopbackServer
from pipecat_harness.sim.scenario import Scenario
from pipecat_harness.sim.scripted_llm import ModelCall, ScriptedChatModel
from pipecat_harness.sim.sim_tts import SpeechLedger, SpokenWord

__all__ = ["LoopbackLLM", "LoopbackServices"]

LoopbackLLM = Literal["gemini", "openai"]
_KEY = "loopback"


@dataclass
class LoopbackServices:
    """The fakes of one call and the Pipecat services pointed at them (:meth:`start`, then :meth:`stop`)."""

    stt: STTService
    llm: LLMService[Any]
    tts: TTSService
    model: ScriptedChatModel
    deepgram: DeepgramFake
    llm_fake: LoopbackServer
    elevenlabs: ElevenLabsFake
    exchanges: list[Exchange] = field(default_factory=list)

    @classmethod
    async def start(
        cls, scenario: Scenario, ledger: SpeechLedger, *, sample_rate: int, llm: LoopbackLLM = "gemini"
    ) -> LoopbackServices:
        """Start the fakes for ``scenario`` and build the services."""
        from pipecat.services.deepgram.stt import DeepgramSTTService
        from pipecat.services.elevenlabs.tts import ElevenLabsTTSService

        exchanges: list[Exchange] = []
        model = ScriptedChatModel(scenario.model)

        def on_words(context_id: str, words: list[SynthesizedWord]) -> None:
            ledger.words.setdefault(context_id, []).extend(SpokenWord(w.word, w.start, w.end) for w in words)
            end = max(ledger.synthesized_secs.get(context_id, 0.0), words[-1].end if words else 0.0)
            ledger.synthesized_secs[context_id] = end

        record = exchanges.append
        deepgram = await DeepgramFake(on_exchange=record).start()
        wpm, first_audio = scenario.tts.words_per_minute, scenario.tts.first_audio_secs
        elevenlabs = await ElevenLabsFake(
            words_per_minute=wpm, first_audio_secs=first_audio, on_words=on_words, on_exchange=record
        ).start()
        system = scenario.model.system
        llm_fake: LoopbackServer
        llm_service: LLMService[Any]
        if llm == "openai":
            from pipecat.services.openai.llm import OpenAILLMService

            llm_fake = openai_fake = await OpenAIChatFake(model, server="openai", on_exchange=record).start()
            settings = OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction=system)
            llm_service = OpenAILLMService(api_key=_KEY, base_url=openai_fake.base_url, settings=settings)
        else:
            from pipecat.services.google.llm import GoogleLLMService

            llm_fake = gemini_fake = await GeminiFake(model, on_exchange=record).start()
            settings_g = GoogleLLMService.Settings(system_instruction=system)
            llm_service = GoogleLLMService(api_key=_KEY, http_options=gemini_fake.http_options(), settings=settings_g)
        stt = DeepgramSTTService(api_key=_KEY, base_url=deepgram.base_url, sample_rate=sample_rate)
        voice = ElevenLabsTTSService.Settings(voice="loopback")
        tts = ElevenLabsTTSService(api_key=_KEY, url=elevenlabs.url, sample_rate=sample_rate, settings=voice)
        return cls(stt, llm_service, tts, model, deepgram, llm_fake, elevenlabs, exchanges)

    def model_calls(self) -> list[ModelCall]:
        """Every model call, with what the fake actually streamed."""
        return self.model.sync()

    async def stop(self) -> None:
        """Stop every fake."""
        for fake in (self.deepgram, self.llm_fake, self.elevenlabs):
            await fake.stop()
