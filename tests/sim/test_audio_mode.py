"""Audio mode: Piper -> Silero VAD -> Whisper tiny.en through the same PipelineWorker on the virtual clock.

A small slice (one call, one utterance) keeps CI's audio work to a minute or
two; the full corpus runs in ``scripts/bench_input.py --audio``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipecat_harness.sim.audio.requirements import missing_audio_packages

pytestmark = pytest.mark.skipif(bool(missing_audio_packages()),
                                reason=f"audio mode needs {', '.join(missing_audio_packages())} ([audio] extra)")


def test_cache_returns_what_was_stored_and_counts_hits(tmp_path: Path) -> None:
    from pipecat_harness.sim.audio.cache import AudioCache

    cache = AudioCache(tmp_path)
    assert cache.transcript("k") is None
    cache.put_transcript("k", " W-237. ", model="m")
    cache.put_audio("a", b"\x01\x02")
    assert cache.transcript("k") == " W-237. " and cache.audio("a") == b"\x01\x02"
    assert (cache.hits, cache.misses) == (2, 1)


def test_a_split_order_number_call_on_real_speech_recognition() -> None:
    from pipecat_harness.sim.audio.mode import AudioMode
    from pipecat_harness.sim.runner import run_scenario
    from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario

    scenario = load_scenario(BUNDLED_DIR / "input_split_order_number.yaml")
    result = run_scenario(scenario, controls=["identifier_hold"], audio=AudioMode())
    assert result.caller_completed
    actions = [d.action for d in result.decisions if d.control == "identifier_hold"]
    assert actions[0] == "held" and actions[-1] in ("merged", "released")
    assert result.passed, [c.detail for c in result.checks if not c.ok]


def test_a_murmured_reply_starts_real_vad_gives_no_words_and_is_reasked_through_pipecats_recovery() -> None:
    from pipecat.frames.frames import TranscriptionFrame, VADUserStartedSpeakingFrame
    from pipecat.observers.base_observer import BaseObserver, FramePushed
    from pipecat.processors.audio.vad_processor import VADProcessor
    from pipecat.processors.frame_processor import FrameDirection

    from pipecat_harness.sim.audio.mode import AudioMode
    from pipecat_harness.sim.audio.recogniser import CachedWhisperSTTService
    from pipecat_harness.sim.runner import run_scenario
    from pipecat_harness.sim.scenario import BUNDLED_DIR, load_scenario

    line: list[str] = []  # what Silero and Whisper made of the caller's audio, in order

    class _Line(BaseObserver):
        async def on_push_frame(self, data: FramePushed) -> None:
            # Pipecat broadcasts a VAD start both ways: count the copy going down the pipeline.
            if (isinstance(data.source, VADProcessor) and isinstance(data.frame, VADUserStartedSpeakingFrame)
                    and data.direction == FrameDirection.DOWNSTREAM):
                line.append("<speech>")
            if isinstance(data.source, CachedWhisperSTTService) and isinstance(data.frame, TranscriptionFrame):
                line.append(data.frame.text.strip())

    scenario = load_scenario(BUNDLED_DIR / "input_silent_confirmation.yaml")
    result = run_scenario(scenario, controls=["silent_reply"], audio=AudioMode(), observers=[_Line()])
    # The caller's reply to "Shall I cancel it?" is a murmur: VAD starts on it and the recogniser writes nothing.
    asked = line.index("Please cancel my order W4817420")
    confirmed = next(i for i, heard in enumerate(line) if heard.lower().startswith("yes"))
    assert line[asked + 1:confirmed] == ["<speech>", "<speech>"], line  # the murmur, then the "yes"
    reasks = [d for d in result.decisions if d.control == "silent_reply" and d.action == "reasked"]
    assert len(reasks) == 1 and reasks[0].evidence["via"] == "EmptyUserTurnConfig"
    assert result.passed, [c.detail for c in result.checks if not c.ok]


@pytest.mark.parametrize("turn_stop", ["speech_timeout", "smart_turn"])
def test_a_recorded_utterance_replays_into_one_user_message(turn_stop: str) -> None:
    from pipecat_harness.input import IdentifierHoldConfig
    from pipecat_harness.sim.audio.cache import AudioCache
    from pipecat_harness.sim.audio.recording import record_utterance, utterance_audio
    from pipecat_harness.sim.audio.replay import replay
    from pipecat_harness.sim.audio.voice import PiperCallerVoice

    cache = AudioCache()
    parts, pause = ["My order number is W two three seven", "eight one five six"], 1.4
    utterance = record_utterance(parts, pause, rate=1.0, cache=cache)
    assert len(utterance.transcripts) == 2  # VAD heard two stretches of speech
    pcm, _ = utterance_audio(parts, pause, PiperCallerVoice(cache), rate=1.0)
    off = replay(utterance, pcm, turn_stop=turn_stop, hold_config=None)
    on = replay(utterance, pcm, turn_stop=turn_stop, hold_config=IdentifierHoldConfig.for_domain("retail"))
    assert len(off.messages) == 2  # without the hold the pause splits the identifier
    assert len(on.messages) == 1 and not on.watchdog
    assert on.stops[0] - utterance.parts_end[-1] < 2.0
