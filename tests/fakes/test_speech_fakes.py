"""Pipecat's DeepgramSTTService and ElevenLabsTTSService against the loopback fakes."""

from __future__ import annotations

import asyncio

from pipecat.frames.frames import (
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_harness.fakes import DeepgramFake, ElevenLabsFake

AUDIO = [InputAudioRawFrame(bytes(640), 16000, 1) for _ in range(25)]  # 0.5 s


async def _drive(fake: DeepgramFake, *, final_after: float) -> None:
    await fake.connected.wait()
    await asyncio.sleep(0.2)
    await fake.interim("I want to")
    fake.expect_final("I want to return my order.")
    await asyncio.sleep(final_after)
    await fake.final()


async def _transcribe(fake: DeepgramFake, frames: list, final_after: float) -> list:
    stt = DeepgramSTTService(api_key="offline", base_url=fake.base_url, sample_rate=16000)
    driver = asyncio.ensure_future(_drive(fake, final_after=final_after))
    try:
        down, _ = await run_test(stt, frames_to_send=frames, expected_down_frames=None)
    finally:
        driver.cancel()
    return [(type(f).__name__, f.text, bool(f.result.from_finalize)) for f in down
            if isinstance(f, (TranscriptionFrame, InterimTranscriptionFrame))]


async def test_finalize_after_the_vad_stop_delivers_the_final_once():
    fake = await DeepgramFake(finalize_delay_secs=0.15).start()
    try:
        frames = [SleepFrame(sleep=0.3), *AUDIO, VADUserStoppedSpeakingFrame(), SleepFrame(sleep=1.5)]
        got = await _transcribe(fake, frames, final_after=1.0)
    finally:
        await fake.stop()
    assert got == [("InterimTranscriptionFrame", "I want to", False),
                   ("TranscriptionFrame", "I want to return my order.", True)]
    kinds = [e.kind for e in fake.log if e.direction == "received"]
    assert kinds[0] == "connect" and "Finalize" in kinds and kinds[-1] == "CloseStream"
    finalize = next(e for e in fake.log if e.kind == "Finalize")
    answer = next(e for e in fake.log if e.direction == "sent" and e.payload.get("from_finalize"))
    assert answer.t - finalize.t >= 0.15
    results = fake.sent("Results")
    assert results[-1]["duration"] > 0 and results[-1]["channel"]["alternatives"][0]["words"]


async def test_endpointed_final_without_finalize_is_speech_final():
    fake = await DeepgramFake().start()
    try:
        got = await _transcribe(fake, [SleepFrame(sleep=0.3), *AUDIO, SleepFrame(sleep=1.2)], final_after=0.5)
    finally:
        await fake.stop()
    assert got[-1] == ("TranscriptionFrame", "I want to return my order.", False)
    assert fake.sent("Results")[-1]["speech_final"] is True


async def test_audio_carries_character_alignment_and_word_times():
    words: list = []
    fake = await ElevenLabsFake(words_per_minute=300, on_words=lambda c, w: words.extend(w)).start()
    try:
        tts = ElevenLabsTTSService(api_key="offline", url=fake.url, sample_rate=16000,
                                   settings=ElevenLabsTTSService.Settings(voice="loopback"))
        down, _ = await run_test(tts, frames_to_send=[TTSSpeakFrame("Your order has shipped."), SleepFrame(sleep=2)],
                                 expected_down_frames=None)
    finally:
        await fake.stop()
    spoken = [f for f in down if isinstance(f, TTSTextFrame)]
    assert [f.text for f in spoken] == ["Your", "order", "has", "shipped."]
    starts = [(f.pts - spoken[0].pts) / 1e9 for f in spoken]
    assert [round(s, 2) for s in starts] == [round(w.start, 2) for w in words]
    audio_secs = sum(len(f.audio) for f in down if isinstance(f, TTSAudioRawFrame)) / 32000
    assert abs(audio_secs - sum(m["alignment"]["charStartTimesMs"][-1] + m["alignment"]["charDurationsMs"][-1]
                                for m in fake.sent("audio")) / 1000) < 0.01
    assert any(isinstance(f, TTSStoppedFrame) for f in down)
    kinds = [e.kind for e in fake.log if e.direction == "received"]
    assert kinds[:3] == ["connect", "init", "text"] and "close_context" in kinds and kinds[-1] == "close_socket"


async def test_interruption_closes_the_context():
    fake = await ElevenLabsFake(words_per_minute=120, synthesis_speed=1.0).start()
    try:
        tts = ElevenLabsTTSService(api_key="offline", url=fake.url, sample_rate=16000,
                                   settings=ElevenLabsTTSService.Settings(voice="loopback"))
        await run_test(tts, frames_to_send=[TTSSpeakFrame("This is a long sentence that will be cut off."),
                                            SleepFrame(sleep=0.8), InterruptionFrame(), SleepFrame(sleep=0.5)],
                       expected_down_frames=None)
    finally:
        await fake.stop()
    closes = [e for e in fake.log if e.kind == "close_context"]
    assert closes and closes[0].t - fake.log[0].t < 1.5
